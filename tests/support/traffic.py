"""Traffic sources for the replay tests: unbound and BIND writing dnstap to a socket
(and its recording), and tcpdump on the loopback interface."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

from soak.traffic.capture_file import Builder, qname_text
from soak.traffic.dnstap import Listener
from tests.support.servers import (
    DEFAULT_LOCAL_DATA,
    ServerProc,
    free_port,
    serving,
    spawn,
    unbound_conf,
)
from tests.support.waiting import wait_for

PROBE = ("www.example.test.", 1)  # what the servers' readiness probe asks


def dnstap_conf(socket_path: Path) -> str:
    return f"""dnstap:
    dnstap-enable: yes
    dnstap-socket-path: "{socket_path}"
    dnstap-log-client-query-messages: yes
    dnstap-log-client-response-messages: yes
"""


@contextlib.contextmanager
def unbound_dnstap(tmp: Path, socket_path: Path, tcp_idle_ms: int = 30000) -> Iterator[ServerProc]:
    """unbound on loopback that writes its client queries and responses as dnstap to
    `socket_path` (someone must listen there: unbound connects, and reconnects)."""
    port = free_port()
    conf = unbound_conf(port, DEFAULT_LOCAL_DATA).replace(
        "    so-reuseport: yes\n",
        f"    so-reuseport: yes\n    tcp-idle-timeout: {tcp_idle_ms}\n    incoming-num-tcp: 100\n",
    )
    path = tmp / "unbound.conf"
    path.write_text(conf + dnstap_conf(socket_path))
    with serving(
        spawn("unbound", ["unbound", "-d", "-c", str(path)], tmp, port), "www.example.test."
    ) as s:
        yield s


@contextlib.contextmanager
def tcpdump_lo(port: int, out: Path) -> Iterator[None]:
    """tcpdump -i lo on `port` into `out`, started (it says it listens) before the body
    runs and stopped (its file complete) after."""
    tcpdump = shutil.which("tcpdump") or "/usr/bin/tcpdump"
    proc = subprocess.Popen(
        [
            tcpdump,
            "-i",
            "lo",
            "--immediate-mode",
            "-U",
            "-B",  # KiB: a busy machine's tcpdump falls behind a burst; its packets wait here
            "16384",
            "-n",
            "-w",
            str(out),
            "-Z",
            "root",
            f"port {port}",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    listening = threading.Event()
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "listening on" in line:
                listening.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        wait_for(lambda: listening.is_set() or proc.poll() is not None, 20, "tcpdump listens", 0.05)
        assert listening.is_set(), "".join(lines)
        yield
    finally:
        proc.terminate()
        proc.wait(10)


NAMED_ZONE = """$TTL 3600
@ IN SOA ns.example.test. hostmaster.example.test. 1 3600 600 86400 3600
@ IN NS ns.example.test.
@ IN MX 10 mail.example.test.
ns IN A 192.0.2.12
www IN A 192.0.2.10
www IN AAAA 2001:db8::10
mail IN A 192.0.2.11
"""


def named_conf(workdir: Path, port: int, socket_path: Path, recursion: bool, tap: str) -> str:
    """BIND 9 serving example.test on loopback, its dnstap to `socket_path`; `tap` is the
    `dnstap { ... }` selection (an authoritative BIND's client queries are `auth query`)."""
    recursive = "recursion yes; allow-recursion { 127.0.0.1; };" if recursion else "recursion no;"
    return f"""options {{
    directory "{workdir}";
    pid-file "{workdir}/named.pid";
    listen-on port {port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    {recursive}
    dnssec-validation no;
    dnstap {{ {tap} }};
    dnstap-output unix "{socket_path}";
}};
controls {{ }};
zone "example.test" {{ type primary; file "{workdir}/example.test.db"; }};
"""


@contextlib.contextmanager
def named_dnstap(
    tmp: Path, socket_path: Path, *, recursion: bool, tap: str
) -> Iterator[ServerProc]:
    """named (BIND 9, built with --enable-dnstap) in the foreground on loopback, writing
    the dnstap messages `tap` selects to `socket_path` (someone must listen there)."""
    port = free_port()
    (tmp / "example.test.db").write_text(NAMED_ZONE)
    conf = tmp / "named.conf"
    conf.write_text(named_conf(tmp, port, socket_path, recursion, tap))
    argv = ["named", "-g", "-c", str(conf)]
    with serving(spawn("named", argv, tmp, port), "www.example.test.") as s:
        yield s


class TapRecording:
    """A dnstap socket read in a thread (a client is an address and a port) until the
    queries besides the readiness probe reach the number `wait` is given."""

    def __init__(self, socket_path: Path) -> None:
        self.listener = Listener(socket_path)
        self.builder = Builder("dnstap", by_port=True)
        self._want = -1
        self._thread = threading.Thread(
            target=self.listener.record, args=(120, self.builder, self._done)
        )
        self._thread.start()

    def _done(self) -> bool:
        raw = self.builder._raw
        got = sum(1 for r in raw if (qname_text(r[6]), r[5]) != PROBE)
        return self._want >= 0 and got >= self._want

    def wait(self, queries: int) -> None:
        self._want = queries
        self._thread.join(120)

    def close(self) -> None:
        self._want = 0
        self._thread.join()
        self.listener.close()
