"""A soak's `upgrade:` section: the target swapped in place while the load goes on.

Each swap says when (`at:` a duration from the run's start, or `after:` a phase, at
its end), what the target becomes (only the fields that change: `version`, a process's
`argv` and `env`, a docker target's `image`, `command` and `environment`), an optional
`migrate:` step, the checklist run after the new version is ready (the upgrade gate's
checks, `{{var}}` filled from `vars`), and an optional `rollback:` (at its own moment,
`at:` or `after:`, the version before the swap again on the data the new one migrated,
after an optional down-migration, with its own checks).

The checks and the migrate step are the upgrade gate's models, which live above this
layer (soak.upgrade.config): here they are kept as the mappings the YAML gave, and
soak.upgrade.insoak validates them where every scenario is read (`soak validate`,
`soak start`, the service's POST /runs), with the same YAML paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field, TypeAdapter, model_validator

from soak.targets.specs import TargetConfig
from soak.units import DurationS, StrictModel

# The fields of a target a swap may change, by the target's runtime.
SWAPPABLE: dict[str, frozenset[str]] = {
    "process": frozenset({"version", "argv", "env"}),
    "docker": frozenset({"version", "image", "command", "environment"}),
}


class SwapTarget(StrictModel):
    """What changes in the target; every other field (ports, readiness, data) stays."""

    version: str = Field(min_length=1)
    argv: list[str] | None = Field(default=None, min_length=1)
    env: dict[str, str] | None = None
    image: str | None = None
    command: list[str] | None = None
    environment: dict[str, str] | None = None

    def changes(self) -> dict[str, Any]:
        """The fields given, as an update of the target's model (a stored scenario read
        back has every field set, the ones not given as None)."""
        return {
            n: getattr(self, n) for n in type(self).model_fields if getattr(self, n) is not None
        }


class _When(StrictModel):
    """A moment of the run: `at` a duration from its start, or `after` a phase (its end)."""

    at: DurationS | None = Field(default=None, gt=0)  # seconds from the run's start
    after: str | None = None  # a phase's name: at its end

    @model_validator(mode="after")
    def _when(self) -> _When:
        if (self.at is None) == (self.after is None):
            raise ValueError("give either `at` (a duration) or `after` (a phase's name)")
        return self


class SwapRollback(_When):
    """Back to the version before the swap, on the data the new one wrote, at its own
    moment (after the swap, before the next one)."""

    checks: list[dict[str, Any]] = Field(min_length=1)
    migrate: dict[str, Any] | None = None  # a down-migration, as `migrate:`


class Swap(_When):
    target: SwapTarget
    migrate: dict[str, Any] | None = None  # the gate's `migrate:` (command, env, timeout_s)
    checks: list[dict[str, Any]] = Field(min_length=1)
    rollback: SwapRollback | None = None


class UpgradeSection(StrictModel):
    vars: dict[str, str] = Field(default_factory=dict)  # defaults for {{name}}
    swaps: list[Swap] = Field(min_length=1)


def swapped_config(current: TargetConfig, target: SwapTarget) -> TargetConfig:
    """The target's config with a swap's fields changed (validated again as a whole)."""
    data = current.model_dump(mode="json", by_alias=True)
    data.update(target.changes())
    adapter: TypeAdapter[TargetConfig] = TypeAdapter(TargetConfig)
    return adapter.validate_python(data)


@dataclass(frozen=True)
class Versions:
    """What one swap changes the target from and to, and back to on its rollback."""

    before: TargetConfig  # the version the swap stops (its rollback's target)
    after: TargetConfig  # the version it brings in


def swap_versions(section: UpgradeSection, first: TargetConfig) -> list[Versions]:
    """Each swap's versions, in order: a swap changes the version running before it
    (the one before it brought in, or, after that one's rollback, the one it stopped)."""
    out: list[Versions] = []
    current = first
    for swap in section.swaps:
        out.append(Versions(current, swapped_config(current, swap.target)))
        current = current if swap.rollback is not None else out[-1].after
    return out


def swapped_targets(section: UpgradeSection, first: TargetConfig) -> list[TargetConfig]:
    """The target each swap brings in, in order."""
    return [v.after for v in swap_versions(section, first)]


def _moment(when: _When, ends: dict[str, float], where: str) -> float:
    if when.after is not None:
        if when.after not in ends:
            raise ValueError(f"{where}.after: no phase {when.after!r} (phases: {', '.join(ends)})")
        return ends[when.after]
    return float(when.at or 0.0)


def move_offsets_s(
    section: UpgradeSection, phases: list[tuple[str, float]]
) -> list[tuple[float, float | None]]:
    """Each swap's moment and its rollback's (None without one), in seconds from the
    run's start; `phases`: (name, duration_s). Raises ValueError naming the swap or
    rollback that is not inside the run or out of order (each after the one before)."""
    ends: dict[str, float] = {}
    elapsed = 0.0
    for name, duration_s in phases:
        elapsed += duration_s
        ends[name] = elapsed
    out: list[tuple[float, float | None]] = []
    last_s: float | None = None
    for i, swap in enumerate(section.swaps):
        moments: list[float | None] = []
        for when, where in ((swap, f"swaps.{i}"), (swap.rollback, f"swaps.{i}.rollback")):
            if when is None:
                moments.append(None)
                continue
            at_s = _moment(when, ends, where)
            if at_s >= elapsed:
                raise ValueError(
                    f"{where}: at {at_s:g} s is not before the run's end ({elapsed:g} s)"
                )
            if last_s is not None and at_s <= last_s:
                before = "its swap" if when is swap.rollback else "the swap or rollback before it"
                raise ValueError(f"{where}: at {at_s:g} s is not after {before}")
            moments.append(last_s := at_s)
        out.append((float(moments[0] or 0.0), moments[1]))
    return out


def check_swappable(section: UpgradeSection, runtime: str) -> None:
    """Each swap changes only fields the target's runtime has; raises ValueError."""
    allowed = SWAPPABLE.get(runtime)
    if allowed is None:
        raise ValueError(f"a {runtime} target cannot be swapped (process or docker targets)")
    for i, swap in enumerate(section.swaps):
        wrong = sorted(set(swap.target.changes()) - allowed)
        if wrong:
            raise ValueError(
                f"swaps.{i}.target: {', '.join(wrong)} not a field of a {runtime} target"
                f" (it takes {', '.join(sorted(allowed))})"
            )


def scaled_section(section: UpgradeSection, factor: float) -> UpgradeSection:
    """The section of a run whose phases were scaled by `factor` (`--duration`): each
    `at` scaled too, on a whole second as the phases are (an `after` follows its phase
    by itself)."""

    def scaled(when: Any) -> Any:
        if when is None or when.at is None:
            return when
        return when.model_copy(update={"at": float(max(1, round(when.at * factor)))})

    swaps = [scaled(s).model_copy(update={"rollback": scaled(s.rollback)}) for s in section.swaps]
    return section.model_copy(update={"swaps": swaps})
