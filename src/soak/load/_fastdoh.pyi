from typing import Any

from soak.load._compiled_face import CompiledLoad
from soak.load._fastudp import RawWindow

Connections = tuple[int, int, int, dict[int, int], int, int, int, int, int]

class Engine(CompiledLoad):
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
    def finish(self) -> None: ...
    def set_address(self, host: str | None, port: int) -> None:
        """Where later connects go (None: nowhere, each fails)."""
        ...
    def take(
        self, cursor_second: int
    ) -> tuple[list[RawWindow], int, int, int, int, int, int, int, int, Connections]:
        """The UDP Engine's take, then (opened, errors, resumed, {handshake us: n},
        hung_up, streams reset, refused, retried, GOAWAYs) of the interval's connections."""
        ...
