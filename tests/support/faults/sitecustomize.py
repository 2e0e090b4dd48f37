"""A fault for the tests, loaded by a process whose PYTHONPATH starts here: with
SOAK_TEST_REPLAY_RAISE_AT=N, the Nth query a replay of this process sends raises
(RuntimeError, once; in the compiled loop, the batch that sent it). No server makes
today's replay raise any more (a DoH server's stream limit opens another connection),
so a test of what a soak run does when its replay raises puts the exception there
itself."""

from __future__ import annotations

import os
from typing import Any

_AT = int(os.environ.get("SOAK_TEST_REPLAY_RAISE_AT", "0"))

if _AT > 0:
    from soak.load import replay

    _send = replay.Replay.send
    _sent = 0

    def _send_or_raise(self: replay.Replay, *args: Any, **kwargs: Any) -> None:
        global _sent
        _sent += 1
        if _sent == _AT:
            raise RuntimeError(f"injected fault: the replay's query {_AT} raised")
        _send(self, *args, **kwargs)

    replay.Replay.send = _send_or_raise  # type: ignore[method-assign]

    # The compiled loop sends in C: its batch that holds the Nth query raises once the
    # batch is sent, before its queries are counted as such (wind_up counts them).
    from soak.load.replay import _engine

    _counted = _engine.counted
    _last: dict[int, int] = {}  # per replay: the last query counted, over its loops

    def _counted_or_raise(r: Any, loop: int, last: int | None) -> None:
        global _sent
        if last is not None:
            n = len(r.plan.capture.queries)
            start_loop, first = r.plan.position(r.start_ns)
            before = _last.get(id(r), start_loop * n + first - 1)
            _last[id(r)] = loop * n + last
            was, _sent = _sent, _sent + loop * n + last - before
            if was < _AT <= _sent:
                raise RuntimeError(f"injected fault: the replay's query {_AT} raised")
        _counted(r, loop, last)

    _engine.counted = _counted_or_raise
