"""Traffic sources for the replay tests: unbound writing dnstap to a socket, and
tcpdump on the loopback interface."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

from tests.support.servers import (
    DEFAULT_LOCAL_DATA,
    ServerProc,
    free_port,
    serving,
    spawn,
    unbound_conf,
)
from tests.support.waiting import wait_for


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
