# The face the load's compiled loops (_fastudp, _faststream, _fastdoh) show alike,
# declared once, as _fastengine.h's ENGINE_METHODS writes it once: their stubs derive
# their Engine from CompiledLoad and say only what differs (the constructor, take, and
# finish where there are connections). A stub-only module, as typeshed's _typeshed: the
# C types derive from object at run time, and nothing imports this but the stubs.

class CompiledLoad:
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
