"""A steady query load through the swap (old stops, migrate, new starts).

The load engine (soak.load) runs one worker against the service address from
just before the old version is told to stop until `settle_s` after the new one
is ready. What it saw is a SwapStats: queries sent, answered, lost, and the
longest time without any answer, placed relative to the stop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.interrupt import children_ignore_sigint
from soak.load.generator import LoadRunner
from soak.load.load_config import LoadConfig
from soak.upgrade.actions import StepFailed, Version
from soak.upgrade.config import SwapLoad

WARMUP_TIMEOUT_S = 10.0


@dataclass
class SwapStats:
    rate_qps: float
    duration_s: float
    sent: int
    completed: int
    lost: int
    late: int
    longest_gap_s: float
    # When the longest gap ended, from the moment the old version was told to stop
    # (negative: before it; None: no stop was marked).
    gap_end_after_stop_s: float | None
    rcodes: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    due: int = 0  # the schedule's queries: sent + skipped (soak.load.ledger)
    refused: int = 0  # ICMP errors (connection refused) met while the port was closed

    def describe(self) -> str:
        where = (
            f", ended {self.gap_end_after_stop_s:.2f} s after the stop began"
            if self.gap_end_after_stop_s is not None
            else ""
        )
        refused = f" (the port refused {self.refused} times)" if self.refused else ""
        return (
            f"{self.sent} sent at {self.rate_qps:g} q/s over {self.duration_s:.1f} s, "
            f"{self.completed} answered, {self.lost} lost{refused}, "
            f"longest gap without answers {self.longest_gap_s:.3f} s{where}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "rate_qps": self.rate_qps,
            "duration_s": round(self.duration_s, 3),
            "due": self.due,
            "sent": self.sent,
            "completed": self.completed,
            "lost": self.lost,
            "late": self.late,
            "refused": self.refused,
            "longest_gap_s": round(self.longest_gap_s, 4),
            "gap_end_after_stop_s": None
            if self.gap_end_after_stop_s is None
            else round(self.gap_end_after_stop_s, 4),
            "rcodes": self.rcodes,
            "notes": self.notes,
        }


class SwapLoadRun:
    """The load of one swap: start against the old version, mark the stop, finish."""

    def __init__(self, cfg: SwapLoad, base_dir: Path, allow_targets: list[str]) -> None:
        self.cfg = cfg
        self.base_dir = base_dir
        self.allow_targets = allow_targets
        self._runner: LoadRunner | None = None
        self._started_s = 0.0
        self._stop_began_s: float | None = None
        self.stats: SwapStats | None = None

    def start(self, version: Version) -> str:
        cfg = self.cfg
        load_cfg = LoadConfig(
            rate_qps=cfg.rate_qps,
            protocol=cfg.protocol,
            workers=1,
            flows=cfg.flows,
            timeout_s=cfg.timeout_s,
            mix=cfg.mix,
        )
        host, port = version.dns_address(cfg.port)
        runner = LoadRunner(
            load_cfg,
            (host, port),
            base_dir=self.base_dir,
            allow_targets=self.allow_targets,
            track_gaps=True,
        )
        with children_ignore_sigint():
            runner.start(cfg.rate_qps, cfg.max_duration_s)
        self._runner = runner
        self._started_s = time.monotonic()
        flowing_s = self._wait_flowing(runner)
        return (
            f"{cfg.rate_qps:g} q/s ({cfg.protocol}) on {host}:{port}, "
            f"answered within {flowing_s:.1f} s"
        )

    def _wait_flowing(self, runner: LoadRunner) -> float:
        """Until the old version has answered some of the load (the worker is a fresh
        interpreter and reports once a second): a swap before that would go unseen."""
        deadline_s = self._started_s + WARMUP_TIMEOUT_S
        while time.monotonic() < deadline_s:
            if runner.totals(stddev=False).completed > 0:
                return time.monotonic() - self._started_s
            if not runner.alive():
                break
            time.sleep(0.1)
        result = runner.stop()
        self.stats = SwapStats(self.cfg.rate_qps, 0.0, result.sent, 0, result.lost, 0, 0.0, None)
        why = "; ".join(runner.errors) or f"none within {WARMUP_TIMEOUT_S:g} s"
        raise StepFailed(f"the load got no answers from the old version ({why})")

    def mark_stop(self) -> None:
        """The old version is about to be told to stop."""
        if self._stop_began_s is None:
            self._stop_began_s = time.monotonic()

    @property
    def running(self) -> bool:
        return self._runner is not None and self.stats is None

    def finish(self, settle_s: float | None = None, sleep: Any = time.sleep) -> SwapStats:
        """Keep the load on for `settle_s` (default the plan's), then stop it."""
        assert self._runner is not None
        if self.stats is not None:
            return self.stats
        sleep(self.cfg.settle_s if settle_s is None else settle_s)
        runner = self._runner
        result = runner.stop()
        gap_s, gap_end_s = runner.longest_gap()
        after = None
        if self._stop_began_s is not None and gap_end_s > 0:
            after = gap_end_s - self._stop_began_s
        self.stats = SwapStats(
            rate_qps=self.cfg.rate_qps,
            duration_s=time.monotonic() - self._started_s,
            sent=result.sent,
            completed=result.completed,
            lost=result.lost,
            late=result.late,
            longest_gap_s=gap_s,
            gap_end_after_stop_s=after,
            rcodes=dict(result.rcodes),
            notes=list(result.notes),
            due=result.due,
            refused=result.refused,
        )
        return self.stats
