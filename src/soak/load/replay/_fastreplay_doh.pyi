_Class = tuple[int, int, int, int, int, int, dict[int, int], dict[int, int]]

class Engine:
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
    def play(
        self,
        columns: bytes,
        questions: list[bytes],
        origin_ns: int,
        base_ns: int,
        loop: int,
        first: int,
        end_ns: int,
        return_ns: int,
        worker: int = 0,
        workers: int = 1,
    ) -> tuple[int, bool]: ...
    def drain(self, until_ns: int) -> int: ...
    def take(
        self, below: int, force: bool
    ) -> list[tuple[tuple[int, int, list[_Class]], dict[int, int]]]: ...
    def stats(
        self,
    ) -> tuple[list[int], list[int], int, int, int, int, int, int, int, int, int]: ...
    def conns(self) -> tuple[int, int, int, int, int, int, dict[int, int]]: ...
    def shut(self) -> None: ...
    def writes(self) -> int: ...
