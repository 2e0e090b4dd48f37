"""`soak load --replay FILE` (or a scenario's `load.replay`), as a plan: a capture
replayed as the load (soak.load.replay).

check: the capture read and checked before any socket exists (bad input: exit 2).
run: the replay to its end (loops or duration), its summary (text or JSON).
teardown: the replay's sockets and worker processes are its own (closed and joined in
its loop's `finally`), so a signal reaching them leaves nothing behind.
outcome: exit 1 when nothing was answered.
"""

from __future__ import annotations

import json

import click

from soak.errors import CheckFailed, SoakError
from soak.load.replay import ReplayConfig, format_replay, load_replay, run_replay
from soak.plans.engine import Teardown
from soak.traffic.capture_file import Capture


class ReplayPlan:
    stopped_note = ""

    def __init__(
        self,
        cfg: ReplayConfig,
        server: tuple[str, int],
        duration_s: float | None,
        timeout_s: float,
        seed: int,
        *,
        as_json: bool,
        workers: int = 1,
    ) -> None:
        self.cfg, self.server, self.duration_s = cfg, server, duration_s
        self.timeout_s, self.seed, self.as_json, self.workers = timeout_s, seed, as_json, workers
        self.capture: Capture | None = None
        self.error: SoakError | None = None

    def check(self) -> None:
        self.capture = load_replay(self.cfg)

    def run(self, started: Teardown) -> None:
        server = self.server
        result = run_replay(
            self.cfg, server, self.duration_s, self.timeout_s, self.seed,
            workers=self.workers, capture=self.capture,
        )  # fmt: skip
        if self.as_json:
            click.echo(json.dumps(result.as_dict(), indent=2))
        else:
            click.echo(format_replay(result, f"{server[0]}:{server[1]}"))
        d = result.as_dict()
        if d["sent"] > 0 and d["completed"] == 0:
            self.error = CheckFailed(
                f"no answer from {server[0]}:{server[1]}: {d['lost']} of {d['sent']} lost"
            )

    def outcome(self) -> SoakError | None:
        return self.error
