"""A swap in a soak: the target's new version started in place of the old one while the
load goes on, then the swap's checklist (the upgrade gate's checks, soak.upgrade.checklist).

At its moment (a step of the soak's plan) the driver records the swap as begun
(swaps.json, so the report splits the run's windows there: soak.analysis.segments),
stops the old version, runs `migrate:` on its data, starts the new version on the same
ports and data (a process's directory; a docker target's volume, in a new container) and
waits until it is ready (soak.runs.run.Run.swap_target),
then runs the checks against it. Each step is a `swap` event (the run's events: the
status view, the sinks, Grafana's annotations). The load is not touched: its workers
send on through the gap, and what they lost is in the ledger's windows of the swap's
seconds (refused queries counted lost), which the report reads.

A swap's `rollback:` is a move of the same kind at its own moment: the version the swap
stopped started again on the data the new one migrated (after the optional
down-migration), then the rollback's checks; its record in swaps.json has `rollback`
true, its checks go to swap-N-rollback-junit.xml, its events say `swap N rollback`.

A migration that fails, a new version that does not start, or a failed check ends the
run `failed`, the cause first; the data the old version wrote stays in the run's data
directory (nothing is removed), so the failure can be looked at on it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from soak.clock import NS_PER_S, s_to_ns
from soak.config.upgrade import swap_versions
from soak.errors import SoakError
from soak.runs.ending import Ending
from soak.runs.layout import read_swaps, swap_junit_path, write_swaps
from soak.runs.run import Run
from soak.runs.swaps import move_key
from soak.targets.base import Running
from soak.targets.specs import TargetConfig
from soak.upgrade.actions import Version
from soak.upgrade.checklist import CheckContext, CheckResult, run_checks
from soak.upgrade.insoak import SwapPlan, swap_plans
from soak.upgrade.migrate import MigrateWhere, run_migrate
from soak.upgrade.report import swap_junit
from soak.upgrade.snapshot import Snapshot
from soak.upgrade.template import Values

SWAP_EVENT = "swap"


def case(result: CheckResult) -> dict[str, Any]:
    """A check's result as report.json and swaps.json keep it."""
    return {
        "name": result.name,
        "kind": result.kind,
        "status": result.status,
        "duration_ms": round(result.duration_ms, 1),
        "message": result.message,
    }


def interrupted_swap(run_dir: Path) -> str | None:
    """The cause to end a resumed run with when its service stopped during a swap (its
    record still `running`): which version runs then is not known to have passed its
    checks, so the run is not soaked on half-swapped. The record is marked `interrupted`."""
    swaps = read_swaps(run_dir)
    for swap in swaps:
        if swap.get("status") == "running":
            old, new = swap.get("from_version") or "old", swap.get("version")
            what = f"swap {swap.get('index')}" + ("'s rollback" if swap.get("rollback") else "")
            cause = (
                f"the service stopped during {what} ({old} -> {new}):"
                f" the {'rollback' if swap.get('rollback') else 'swap'}'s checks were not run;"
                " the run ends here"
            )
            swap.update(status="interrupted", cause=cause)
            write_swaps(run_dir, swaps)
            return cause
    return None


def swap_steps(run: Run, now_ns: int) -> list[tuple[str, str, int, SoakSwap]]:
    """The swaps and rollbacks still to come after `now_ns`, as the plan's steps: (job,
    name, moment on the run's clock, step)."""
    out: list[tuple[str, str, int, SoakSwap]] = []
    for swap in swap_plans(run.scenario):
        at_ns = run.timeline.origin_ns + s_to_ns(swap.at_s)
        if at_ns > now_ns:
            out.append((f"swap:{swap.index}", "swap", at_ns, SoakSwap(run, swap)))
        if swap.rollback_at_s is not None:
            back_ns = run.timeline.origin_ns + s_to_ns(swap.rollback_at_s)
            if back_ns > now_ns:
                step = SoakSwap(run, swap, rollback=True)
                out.append((f"rollback:{swap.index}", "rollback", back_ns, step))
    return out


class SoakSwap:
    """One swap of one run, or its rollback: called once, at its moment, by the run's
    scheduler."""

    def __init__(self, run: Run, plan: SwapPlan, *, rollback: bool = False) -> None:
        self.run = run
        self.plan = plan
        self.rollback = rollback
        vars_ = run.scenario.upgrade.vars if run.scenario.upgrade is not None else {}
        self.values = Values(vars_, dict(os.environ))
        self.record: dict[str, Any] = {}
        self.name = f"swap {plan.index}" + (" rollback" if rollback else "")

    def _target(self) -> TargetConfig:
        """The version this move brings in: the swap's, or on its rollback the one the
        swap stopped."""
        section = self.run.scenario.upgrade
        assert section is not None
        versions = swap_versions(section, self.run.scenario.target)[self.plan.index]
        return versions.before if self.rollback else versions.after

    def __call__(self) -> None:
        run = self.run
        if run.ending:
            return
        old_cfg = run.targets.target_cfg
        new_cfg = self._target()
        began_ns = time.time_ns()
        self.record = {
            "index": self.plan.index,
            "from_version": old_cfg.version,
            "version": new_cfg.version,
            "at_s": (began_ns - run.timeline.origin_ns) / NS_PER_S,
            "status": "running",
            "cases": [],
        }
        if self.rollback:
            self.record["rollback"] = True
        self._save()
        old, new = old_cfg.version or "old", new_cfg.version
        verb = "rollback" if self.rollback else "swap"
        run.event(SWAP_EVENT, f"{self.name}: {old} -> {new}: stopping {old}", 0.0)
        log_path = run.targets.running.log_path if run.targets.running else None
        log_from = log_path.stat().st_size if log_path and log_path.exists() else 0
        try:
            running = run.swap_target(new_cfg, self._migrate)
        except SoakError as exc:
            self._fail(f"{verb} to {new}: {exc}")
            return
        if running is None:  # the run ended meanwhile
            return
        ready_s = (time.time_ns() - began_ns) / NS_PER_S
        self.record["ready_s"] = ready_s
        run.event(SWAP_EVENT, f"{self.name}: {new} ready {ready_s:.2f} s after", ready_s)
        checked_ns = time.time_ns()
        results = self._checks(running, new_cfg, log_from)
        self.record["cases"] = [case(r) for r in results]
        suite = f"{run.scenario.name} {self.name} {old} -> {new}"
        took_s = (time.time_ns() - checked_ns) / NS_PER_S
        junit = swap_junit_path(run.run_dir, self.plan.index, self.rollback)
        junit.write_text(swap_junit(suite, results, took_s))
        failed = [r for r in results if r.status != "pass"]
        passed = len(results) - len(failed)
        if failed:
            first = failed[0]
            self._fail(f"{verb} to {new}: check {first.name!r} {first.status}: {first.message}")
            return
        self.record["status"] = "pass"
        self._save()
        said = f"{self.name}: {new}: {passed} of {len(results)} checks passed"
        run.event(SWAP_EVENT, said, float(passed))

    def _migrate(self) -> None:
        """Between the versions: the swap's `migrate:` on the old version's data (the
        rollback's down-migration on the new one's)."""
        step = self.plan.rollback_migrate if self.rollback else self.plan.migrate
        if step is None:
            return
        running = self.run.targets.running
        data_dir = running.data_dir if running is not None else None
        volume = running.volume if running is not None else None  # a docker target's
        where = MigrateWhere(self.run.run_dir, data_dir, volume, self.run.id)
        log_path = self.run.run_dir / f"{self.name.replace(' ', '-')}-migrate.log"
        line = run_migrate(step, self.values, where, log_path)
        self.run.event(SWAP_EVENT, f"{self.name}: migrate: {line}", 0.0)

    def _checks(self, running: Running, cfg: TargetConfig, log_from: int) -> list[CheckResult]:
        sc = self.run.scenario
        env = dict(getattr(cfg, "env", {}) or {})
        version = Version("new", running, running.data_dir, env, list(sc.allow_targets))
        ctx = CheckContext(
            self.values, version, Snapshot.of([]), sc.base_dir, log_from_bytes=log_from
        )
        return run_checks(self.plan.rollback_checks if self.rollback else self.plan.checks, ctx)

    def _fail(self, cause: str) -> None:
        """The run ends `failed`, the cause first; the data stays where it is."""
        self.record["status"] = "failed"
        self.record["cause"] = cause
        self._save()
        self.run.event(SWAP_EVENT, cause, -1.0)
        self.run.finish(Ending.FAILED, cause)

    def _save(self) -> None:
        """This move's record into swaps.json, in its place (the others kept)."""
        mine = move_key(self.record)
        made = [s for s in read_swaps(self.run.run_dir) if move_key(s) != mine]
        write_swaps(self.run.run_dir, sorted([*made, self.record], key=move_key))
