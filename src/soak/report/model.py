"""What a report is built from: the run's identity and outcome, beside its stored points."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak.analysis.criteria import CriterionResult
from soak.analysis.leaks import LeakVerdict
from soak.analysis.rundata import StoreReader
from soak.analysis.scenario_sections import LeaksConfig
from soak.analysis.segments import VersionSpan

# Statuses of a run that ended before its timeline ran out: never headlined as a pass
# (`abandoned`: its foreground command died, soak.runs.state.RunStatus).
ENDED_EARLY = ("stopped", "failed", "error", "abandoned")


@dataclass(frozen=True, slots=True)
class PhaseSpan:
    name: str
    start_ns: int
    end_ns: int | None  # None: still running (the report ends at the last sample)
    warmup: bool = False


@dataclass
class ReportInput:
    run_id: str
    scenario_name: str
    target_name: str
    version: str
    target_desc: str  # the image or argv, and how it runs (e.g. "docker pdns:4.7 --read-only")
    started_ns: int
    ended_ns: int | None
    status: str
    phases: list[PhaseSpan]
    startup: dict[str, float]  # e.g. {"ready_s": 0.44, "idle_rss_bytes": 1.1e8}
    criteria: list[CriterionResult]
    verdicts: list[LeakVerdict]
    # Events to list; None: the run's stored `event` points.
    events: list[dict[str, Any]] | None = None
    # The machine's description; None: this host (where the service runs).
    host: dict[str, str] | None = None
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # shown in the setup table as is
    run_dir: Path | None = None  # where the pprof sampler kept Go profiles ("What grew")
    # A docker mem_limit or the scenario's limits.memory_bytes: growing memory projects to it.
    memory_limit_bytes: float | None = None
    # The version the target itself reports (target.version_command, a docker image's
    # label): None when the scenario does not say how to ask.
    detected_version: str | None = None
    planned_s: float | None = None  # the phases' total: a run that ended before it ended early
    # A soak across an upgrade: its versions' seconds (soak.analysis.segments), the
    # record of the swap that brought each in (swaps.json's, by segment index), the leak
    # settings each segment's verdicts are fitted with. One version: no segments.
    versions: list[VersionSpan] = field(default_factory=list)
    swaps: dict[int, dict[str, Any]] = field(default_factory=dict)
    leaks: LeaksConfig | None = None


# The "What grew" section (soak.results.grew.report_section registers it): the store, the
# run, its verdicts as the report shows them; None where the run has nothing to show.
WhatGrew = Callable[[StoreReader, ReportInput, list[dict[str, Any]]], dict[str, Any] | None]
