"""`python -m soak.load.child CTRL_FD STATS_FD`: one load worker process.

Workers are separate interpreters started by LoadRunner (not multiprocessing
spawn or fork: spawn re-imports the caller's main module and fork is unsafe in
a service with threads). The first message on the control pipe is the
WorkerSpec; Intervals go back on the stats pipe.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

from soak.clock import ns_to_s
from soak.load.worker import Control, WorkerSpec

Loop = Callable[[WorkerSpec, Control, Connection], None]


def loop_for(spec: WorkerSpec) -> Loop:
    """The compiled loops where they are built: UDP's batched one, DoH's (OpenSSL and
    nghttp2), and TCP's and DoT's (their connection policies too, hang-ups aside); the
    Python loops otherwise (said on stderr). SOAK_LOAD_PURE=1 forces the Python loops,
    and so does a UDP or DoH spec that measures silences between replies (`track_gaps`)."""
    pure = os.environ.get("SOAK_LOAD_PURE") == "1"
    if spec.protocol == "doh":
        return doh_loop(spec, pure or spec.track_gaps)
    if spec.protocol in ("tcp", "dot"):
        return stream_loop(spec, pure)
    from soak.load import udp_fast

    if udp_fast.available() and not (pure or spec.track_gaps):
        return udp_fast.run_udp_fast
    if not pure and not udp_fast.available():
        say_fallback("soak.load._fastudp", spec)
    from soak.load.udp import run_udp

    return run_udp


def stream_loop(spec: WorkerSpec, pure: bool) -> Loop:
    """The compiled TCP/DoT loop (it serves every spec, a server given by name too), or
    the Python one when asked for or, said on stderr, when the compiled one is not built."""
    from soak.load import stream_fast
    from soak.load.tcp import run_tcp

    if pure:
        return run_tcp
    if stream_fast.available():
        return stream_fast.run_stream_fast
    say_fallback("soak.load._faststream", spec)
    return run_tcp


def doh_loop(spec: WorkerSpec, pure: bool) -> Loop:
    """The compiled DoH loop, or the Python one with the reason on stderr (once, by the
    first worker: the others run the same spec on the same build)."""
    from soak.load import doh_fast
    from soak.load.tcp import run_tcp

    unfit = doh_fast.unfit(spec)
    if doh_fast.available() and unfit is None and not pure:
        return doh_fast.run_doh_fast
    if pure:
        why = "SOAK_LOAD_PURE=1 or track_gaps"
    elif not doh_fast.available():
        why = f"soak.load._fastdoh is not built: it needs {doh_fast.BUILD_NEEDS}"
    else:
        why = str(unfit)
    if spec.index == 0:
        print(f"soak load: DoH runs on the pure-Python loop ({why})", file=sys.stderr)
    return run_tcp


def say_fallback(module: str, spec: WorkerSpec) -> None:
    """Once per run (worker 0): the Python loop runs because the compiled one is missing."""
    if spec.index == 0:
        print(
            f"soak load: {module} is not built; {spec.protocol} runs the Python loop "
            "(install gcc, python3-dev and libssl-dev, then `pip install -e .`)",
            file=sys.stderr,
        )


def main(argv: list[str]) -> int:
    ctrl = Connection(int(argv[0]), writable=False)
    stats = Connection(int(argv[1]), readable=False)
    try:
        spec = ctrl.recv()
        assert isinstance(spec, WorkerSpec)
        control = Control(ctrl, spec.rate_qps)
        loop = loop_for(spec)  # imported before the wait: the first query leaves on time
        wait_s = ns_to_s(spec.begin_at_ns - time.monotonic_ns())
        if wait_s > 0:
            time.sleep(wait_s)
        loop(spec, control, stats)
    except (BrokenPipeError, EOFError):
        # The parent closed its ends (it stopped, or it is shutting down): there is no
        # one left to report to, and a traceback on its terminal would be noise.
        return 0
    except Exception as exc:  # reported to the parent, which marks the run failed
        try:
            stats.send(("error", f"worker: {type(exc).__name__}: {exc}"))
        except BrokenPipeError:
            print(f"soak load worker: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        stats.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
