"""The replay: a capture's clients, each with its own queries, timing and connections,
played loop after loop against a server (docs/replay.md); and a soak run's load from it.

This is the replay's one face; its rooms are private:

    _loop       the send and reply loop (Replay), run_replay for `soak load --replay`
    _engine     which loop plays a replay: a compiled one (_fastreplay: UDP, C) or _loop's
    _stream     the compiled TCP and DoT loop (_fastreplay_stream, C) behind _fastreplay's face
    _conns      each client's UDP socket and stream connections
    _plan       each captured query's send time, client, connection and name per loop
    _windows    the replay's one-second windows on the run's grid (the ledger's rows)
    _result     what a replay reports, and its text summary
    _run_load   a soak run's load from a capture, behind the face SupervisedLoad has
    _process    a soak run's replay in a process of its own, as the run's process sees it
    _child      that process (`python -m soak.load.replay._child`)

Its section model (`load.replay`) is soak.traffic.replay_config: the load section
(soak.load.load_config) names it, and it names no part of the replay.
"""

from soak.load.replay._conns import ClientConns
from soak.load.replay._loop import Replay, load_replay, run_replay
from soak.load.replay._plan import Plan, Planned
from soak.load.replay._result import Offsets, OffsetTotals, ReplayResult, format_replay
from soak.load.replay._run_load import ReplayLoad
from soak.load.replay._windows import ReplayWindows
from soak.traffic.replay_config import BOUND_P99_US, ReplayConfig, Rewrite

__all__ = [
    "BOUND_P99_US",
    "ClientConns",
    "OffsetTotals",
    "Offsets",
    "Plan",
    "Planned",
    "Replay",
    "ReplayConfig",
    "ReplayLoad",
    "ReplayResult",
    "ReplayWindows",
    "Rewrite",
    "format_replay",
    "load_replay",
    "run_replay",
]
