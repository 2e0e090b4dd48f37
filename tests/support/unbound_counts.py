"""unbound with its remote-control socket, for tests that check the ledger against the
server's own count of the queries it received (all, and over TCP)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from soak.samplers.server import unbound_control
from tests.support import servers
from tests.support.servers import ServerProc, free_port


@contextlib.contextmanager
def unbound_with_control(
    tmp: Path, cert: tuple[Path, Path], options: str = ""
) -> Iterator[tuple[ServerProc, Path]]:
    """unbound with DoT and its remote-control socket: the server's own query counts
    (num.query.tcp is among the extended statistics); `options`: server: lines added
    (a later line overrides an earlier one, e.g. "incoming-num-tcp: 1000")."""
    port, dot, doh = free_port(), free_port(), free_port()
    sock = tmp / "control.sock"
    server_lines = servers.unbound_tls_conf(cert[0], cert[1], dot, doh)
    server_lines += "\n    extended-statistics: yes"
    server_lines += "".join(f"\n    {line}" for line in options.splitlines())
    conf = servers.unbound_conf(port, servers.DEFAULT_LOCAL_DATA, 1, server_lines)
    conf = conf.replace(
        "control-enable: no",
        f'control-enable: yes\n    control-interface: "{sock}"\n    control-use-cert: no',
    )
    (tmp / "unbound.conf").write_text(conf)
    argv = ["unbound", "-d", "-c", str(tmp / "unbound.conf")]
    proc = servers.spawn("unbound", argv, tmp, port, dot=dot, doh=doh)
    with servers.serving(proc, "www.example.test.") as s:
        yield s, sock


def unbound_queries(sock: Path) -> tuple[int, int]:
    """(all queries, those over TCP: DoT included) unbound received so far, by its own
    count."""
    text = unbound_control(sock, "stats_noreset", 10)
    stats = dict(line.split("=", 1) for line in text.splitlines())
    return int(stats["total.num.queries"]), int(stats.get("num.query.tcp", "0"))
