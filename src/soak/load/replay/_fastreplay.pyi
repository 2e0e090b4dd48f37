from soak.load.replay._compiled_face import CompiledReplay

_Counts = tuple[int, int, int, int, int, dict[int, int], dict[int, int]]

class Engine(CompiledReplay):
    def __init__(
        self,
        address: bytes,
        clients: int,
        classes: int,
        timeout_ns: int,
        idle_ns: int,
        rename_clients: bool,
    ) -> None: ...
    def take(self, below: int, force: bool) -> list[tuple[int, list[_Counts], dict[int, int]]]: ...
