from typing import Any

from soak.load._compiled_face import CompiledLoad

# (server_name, ca_file, resumption, alpn in wire format)
TlsArgs = tuple[str | None, str | None, bool, bytes]

class Engine(CompiledLoad):
    def __init__(
        self,
        host: str,
        port: int,
        flows: int,
        tls: TlsArgs | None,
        engine_args: tuple[Any, ...],  # udp_fast.engine_args (its fds unused)
        churn: Any = None,  # stream_fast.churn_args: per class its slots, per slot its policy
    ) -> None: ...
    def finish(self) -> None: ...
    def set_address(self, host: str | None, port: int) -> None:
        """Where later connects go (None: nowhere, each fails)."""
        ...
    def take(self, cursor_second: int) -> tuple[Any, ...]:
        """udp take's 9 counts (the socket counters: queries written whole, messages read,
        queries that failed at the socket), then the connections' (opened, errors,
        resumed, {handshake us: n}, hung_up)."""
        ...
