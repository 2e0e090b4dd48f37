"""A soak's `upgrade:` section, read with the upgrade gate's own models.

soak.config keeps each swap's checks and migrate step as the mappings the YAML gave
(the gate's models live in this layer, above it); `swap_plans` validates them here, with
the gate's checks of names and `{{name}}` places, and says every problem with its YAML
path (`upgrade.swaps.0.checks.1.kind: ...`). `soak validate`, `soak start` and the
service's POST /runs call it, so a scenario is refused before anything starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from soak.config import Scenario
from soak.config.loading import InvalidModel
from soak.config.upgrade import SwapTarget
from soak.errors import InputError
from soak.load.load_config import INPUT_CONTEXT
from soak.targets.specs import DockerTarget
from soak.units import StrictModel
from soak.upgrade.config.checks import Check, CorpusCheck, SwapCheck, UnchangedCheck
from soak.upgrade.config.loading import _checklist_problems, _template_problems
from soak.upgrade.config.models import Migrate, UpgradePlan
from soak.upgrade.room import Move, room_errors, room_warnings
from soak.upgrade.template import referenced_names


class _Steps(StrictModel):
    """One swap's (or rollback's) checklist and migrate step, as the gate reads them."""

    checks: list[Check]
    migrate: Migrate | None = None


@dataclass(frozen=True)
class SwapPlan:
    """One swap, validated: when, what the target becomes, its steps."""

    index: int
    at_s: float  # from the run's start
    version: str
    target: SwapTarget  # the target's fields that change
    checks: list[Check]
    migrate: Migrate | None = None
    rollback_checks: list[Check] = field(default_factory=list)
    rollback_migrate: Migrate | None = None
    rollback_at_s: float | None = None  # from the run's start; None: no rollback

    @property
    def has_rollback(self) -> bool:
        return self.rollback_at_s is not None


def _steps(raw: dict[str, Any], where: str) -> _Steps:
    try:
        return _Steps.model_validate(raw, context=INPUT_CONTEXT)
    except ValidationError as exc:
        bad = InvalidModel("scenario", exc, _Steps)
        raise InputError(
            "\n".join(f"{where}.{path}: {message}" for path, message in bad.fields)
        ) from None


def _problems(checks: list[Check], where: str, names: set[str]) -> list[str]:
    """Names between checks and `{{name}}` places, as the gate checks them; a check that
    compares with the gate's snapshot has none here."""
    empty = UpgradePlan.model_construct(snapshot=[])  # a soak takes no snapshot
    problems = _checklist_problems(empty, checks, where)
    problems = [p for p in problems if ".snapshot:" not in p]
    problems += _template_problems(checks, where)
    for i, check in enumerate(checks):
        if isinstance(check, SwapCheck):
            problems.append(
                f"{where}.{i}.kind: a soak's swap is measured by its windows (the report's"
                " segments), not judged by a swap check"
            )
        if isinstance(check, UnchangedCheck | CorpusCheck):
            problems.append(
                f"{where}.{i}.kind: {check.kind} compares with the gate's snapshot;"
                " a soak takes none"
            )
        for name in sorted(referenced_names(check.model_dump(mode="json", by_alias=True))):
            if name.removeprefix("env.") not in names:
                problems.append(
                    f"{where}.{i}: {{{{{name}}}}} has no value (not in upgrade.vars,"
                    " not in the environment)"
                )
    return problems


def swap_plans(scenario: Scenario, env: Mapping[str, str] | None = None) -> list[SwapPlan]:
    """The scenario's swaps (none without `upgrade:`); raises InputError with every
    problem, one line each."""
    section = scenario.upgrade
    if section is None:
        return []
    names = set(section.vars) | set(os.environ if env is None else env)
    out: list[SwapPlan] = []
    problems: list[str] = []
    target = scenario.target
    docker = isinstance(target, DockerTarget)
    if isinstance(target, DockerTarget) and target.volume is None:  # the data to keep
        problems.append("target.volume: a docker target's swap needs `volume: {mount: PATH}`")
    moments = scenario.move_offsets_s()
    for i, (swap, (at_s, back_at_s)) in enumerate(zip(section.swaps, moments, strict=True)):
        where = f"upgrade.swaps.{i}"
        steps = _steps({"checks": swap.checks, "migrate": swap.migrate}, where)
        problems += _problems(steps.checks, f"{where}.checks", names)
        back = _Steps(checks=[])
        if swap.rollback is not None:
            raw = {"checks": swap.rollback.checks, "migrate": swap.rollback.migrate}
            back = _steps(raw, f"{where}.rollback")
            problems += _problems(back.checks, f"{where}.rollback.checks", names)
        for step, label in ((steps.migrate, "migrate"), (back.migrate, "rollback.migrate")):
            if step is not None and step.container is not None and not docker:
                problems.append(
                    f"{where}.{label}.container: a process target migrates on the host"
                    " (`command:`); a one-shot container is for a docker target's volume"
                )
        out.append(
            SwapPlan(
                i,
                at_s,
                swap.target.version,
                swap.target,
                steps.checks,
                steps.migrate,
                back.checks,
                back.migrate,
                back_at_s,
            )
        )
    problems += room_errors(scenario, swap_moves(scenario, out))
    if problems:
        raise InputError("\n".join(f"scenario: {p}" for p in problems))
    return out


def swap_moves(scenario: Scenario, plans: list[SwapPlan]) -> list[Move]:
    """Each swap and rollback as a Move: the YAML path of its moment, its checks."""
    swaps = scenario.upgrade.swaps if scenario.upgrade is not None else []
    out = []
    for plan, swap in zip(plans, swaps, strict=True):
        where = f"upgrade.swaps.{plan.index}"
        out.append(Move(f"{where}.{'after' if swap.after else 'at'}", plan.at_s, plan.checks))
        if swap.rollback is not None and plan.rollback_at_s is not None:
            key = "after" if swap.rollback.after else "at"
            out.append(Move(f"{where}.rollback.{key}", plan.rollback_at_s, plan.rollback_checks))
    return out


def swap_warnings(scenario: Scenario, plans: list[SwapPlan]) -> list[str]:
    """What a valid `upgrade:` section will not give: a version with too little time
    for its own leak verdicts (soak.upgrade.room)."""
    return room_warnings(scenario, swap_moves(scenario, plans))
