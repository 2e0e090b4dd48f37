from typing import Any

from soak.load._fastudp import RawWindow

Connections = tuple[int, int, int, dict[int, int], int]

class Engine:
    def __init__(
        self,
        engine_args: tuple[Any, ...],
        host: str,
        port: int,
        flows: int,
        get: bool,
        path: str,
        authority: str,
        server_name: str | None,
        ca_file: str | None,
        resume: bool,
        alpn: bytes,
        churn: tuple[list[list[int]], list[tuple[int, int, int, float, int]]] | None = ...,
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
    def sweep(self, everything: bool = ...) -> int: ...
    def skip(self, second: int, n: int) -> None: ...
    def begin(self, start_ns: int) -> None: ...
    def silence_until(self, end_ns: int) -> None: ...
    def finish(self) -> None: ...
    def take(
        self, cursor_second: int
    ) -> tuple[list[RawWindow], int, int, int, int, int, int, int, int, Connections]:
        """The UDP Engine's take, then (opened, errors, resumed, {handshake us: n},
        hung_up) of the interval's connections."""
        ...
