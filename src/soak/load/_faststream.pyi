from typing import Any

from soak.load._fastudp import RawWindow

# (server_name, ca_file, resumption, alpn in wire format)
TlsArgs = tuple[str | None, str | None, bool, bytes]
Counts = tuple[list[RawWindow], int, int, int, int, int, int, int, int]
ConnCounts = tuple[int, int, int, dict[int, int], int]

class Engine:
    def __init__(
        self,
        host: str,
        port: int,
        flows: int,
        tls: TlsArgs | None,
        questions: list[Any],
        randoms: list[Any],
        checks: list[Any],
        schedule: list[int],
        sched_i: int,
        pos: list[int],
        timeout_ns: int,
        max_outstanding: int,
        window_slots: int,
        origin_ns: int,
    ) -> None: ...
    def run(
        self,
        until_ns: int,
        send_end_ns: int,
        rate_qps: float,
        base_ns: int,
        base_k: int,
        phase: float,
        sending: bool,
    ) -> tuple[int, int, bool]: ...
    def open(self, now_ns: int) -> None: ...
    def finish(self) -> None: ...
    def sweep(self, everything: bool = ...) -> int: ...
    def begin(self, start_ns: int) -> None: ...
    def silence_until(self, end_ns: int) -> None: ...
    def skip(self, second: int, n: int) -> None: ...
    def take(self, cursor_second: int) -> tuple[Counts, ConnCounts]:
        """udp take's counts (the socket counters: queries written whole, messages read,
        queries that failed at the socket) and the connections' (opened, errors,
        resumed, {handshake us: n}, hung_up)."""
        ...
