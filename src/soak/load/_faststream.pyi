from typing import Any

# (server_name, ca_file, resumption, alpn in wire format)
TlsArgs = tuple[str | None, str | None, bool, bytes]

class Engine:
    def __init__(
        self,
        host: str,
        port: int,
        flows: int,
        tls: TlsArgs | None,
        engine_args: tuple[Any, ...],  # udp_fast.engine_args (its fds unused)
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
    def finish(self) -> None: ...
    def sweep(self, everything: bool = ...) -> int: ...
    def begin(self, start_ns: int) -> None: ...
    def silence_until(self, end_ns: int) -> None: ...
    def skip(self, second: int, n: int) -> None: ...
    def take(self, cursor_second: int) -> tuple[Any, ...]:
        """udp take's 9 counts (the socket counters: queries written whole, messages read,
        queries that failed at the socket), then the connections' (opened, errors,
        resumed, {handshake us: n}, hung_up)."""
        ...
