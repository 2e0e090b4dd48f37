# The face the replay's compiled loops show, declared once: their stubs (_fastreplay.pyi,
# _fastreplay_stream.pyi, _fastreplay_doh.pyi) derive their Engine from these classes and
# say only what differs (the constructor, and UDP's windows). A stub-only module, as
# typeshed's _typeshed: the C types derive from object at run time, and nothing imports
# this but the stubs.

# A stream loop's window per class: the load engine's window_of (_fastudp_loop.h).
StreamClass = tuple[int, int, int, int, int, int, dict[int, int], dict[int, int]]
# A stream loop's closed window: ((second, refused, [StreamClass]), {send offset us: n}).
StreamWindow = tuple[tuple[int, int, list[StreamClass]], dict[int, int]]

class CompiledReplay:
    """What every compiled replay loop does alike (_fastreplay_play.h, and each face)."""

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
    def stats(
        self,
    ) -> tuple[list[int], list[int], int, int, int, int, int, int, int, int, int]: ...
    def shut(self) -> None: ...

class CompiledStreamReplay(CompiledReplay):
    """The stream loops' (TCP/DoT and DoH) face: _fastreplay_stream_common.h's."""

    def take(self, below: int, force: bool) -> list[StreamWindow]: ...
    def conns(self) -> tuple[int, int, int, int, int, int, dict[int, int]]: ...
    def writes(self) -> int:
        """The writes (SSL_write, or send over TCP) that took bytes so far: one per
        connection a play step touched (flush_step, _fastreplay_step.h), and those made
        as a connection came up or its full socket took more."""
        ...
    def held(self) -> tuple[int, int, int]:
        """(pool entries, connections open, bytes the entries hold in their buffers, open
        or free): a closed connection's are given back, so the bytes follow the
        connections open, not the most ever open at once."""
        ...
