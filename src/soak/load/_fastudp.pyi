from collections.abc import Callable

from soak.load._compiled_face import CompiledLoad

NBUCKETS: int

def bucket_value(us: int) -> int: ...

RawWindow = tuple[int, int, list[tuple[int, ...]]]

class Engine(CompiledLoad):
    def __init__(
        self,
        fds: list[int],
        questions: list[list[bytes] | None],
        randoms: list[Callable[[], bytes] | None],
        checks: list[Callable[[bytes, int], bool] | None],
        schedule: list[int],
        sched_i: int,
        pos: list[int],
        timeout_ns: int,
        max_outstanding: int,
        recv_bytes: int,
        first_flow: int,
    ) -> None: ...
    def take(
        self, cursor_second: int
    ) -> tuple[list[RawWindow], int, int, int, int, int, int, int, int]:
        """(windows, closed_below, unexpected, socket_errors, max_gap_ns, max_gap_end_ns,
        sock_sent, sock_received, send_failed): the last three counted at the sockets
        (sendmmsg's and recvmmsg's returns), apart from the windows."""
        ...
