from soak.load.replay._compiled_face import CompiledStreamReplay

class Engine(CompiledStreamReplay):
    def __init__(
        self,
        address: bytes,
        tls: tuple[str | None, str | None] | None,
        clients: int,
        classes: int,
        timeout_ns: int,
        idle_ns: int,
        rename_clients: bool,
        qstream: bytes,
        stream_client: bytes,
        engine_args: tuple[object, ...],
    ) -> None: ...
