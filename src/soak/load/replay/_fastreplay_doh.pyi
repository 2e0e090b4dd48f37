from soak.load.replay._compiled_face import CompiledStreamReplay

class Engine(CompiledStreamReplay):
    def __init__(
        self,
        address: bytes,
        tls: tuple[str | None, str | None],
        get: bool,
        path: str,
        authority: str,
        clients: int,
        classes: int,
        timeout_ns: int,
        idle_ns: int,
        rename_clients: bool,
        qstream: bytes,
        stream_client: bytes,
        engine_args: tuple[object, ...],
    ) -> None: ...
    def h2(self) -> tuple[int, int, int, int]:
        """(streams the server ended with an HTTP/2 error code, of them REFUSED_STREAM, of
        those sent again on their connection, GOAWAY frames) so far."""
        ...
