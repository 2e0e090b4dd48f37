"""A soak's `upgrade:` section: the target swapped in place while the load goes on.

Each swap says when (`at:` a duration from the run's start, or `after:` a phase, at
its end), what the target becomes (only the fields that change: `version`, a process's
`argv` and `env`, a docker target's `image`, `command` and `environment`), an optional
`migrate:` step, the checklist run after the new version is ready (the upgrade gate's
checks, `{{var}}` filled from `vars`), and an optional `rollback:` (the old version
again on the migrated data, with its own checks).

The checks and the migrate step are the upgrade gate's models, which live above this
layer (soak.upgrade.config): here they are kept as the mappings the YAML gave, and
soak.upgrade.insoak validates them where every scenario is read (`soak validate`,
`soak start`, the service's POST /runs), with the same YAML paths.
"""

from __future__ import annotations

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


class SwapRollback(StrictModel):
    """Back to the version before the swap, on the data the new one wrote."""

    checks: list[dict[str, Any]] = Field(min_length=1)
    migrate: dict[str, Any] | None = None  # a down-migration, as `migrate:`


class Swap(StrictModel):
    at: DurationS | None = Field(default=None, gt=0)  # seconds from the run's start
    after: str | None = None  # a phase's name: at its end
    target: SwapTarget
    migrate: dict[str, Any] | None = None  # the gate's `migrate:` (command, env, timeout_s)
    checks: list[dict[str, Any]] = Field(min_length=1)
    rollback: SwapRollback | None = None

    @model_validator(mode="after")
    def _when(self) -> Swap:
        if (self.at is None) == (self.after is None):
            raise ValueError("give either `at` (a duration) or `after` (a phase's name)")
        return self


class UpgradeSection(StrictModel):
    vars: dict[str, str] = Field(default_factory=dict)  # defaults for {{name}}
    swaps: list[Swap] = Field(min_length=1)


def swapped_config(current: TargetConfig, target: SwapTarget) -> TargetConfig:
    """The target's config with a swap's fields changed (validated again as a whole)."""
    data = current.model_dump(mode="json", by_alias=True)
    data.update(target.changes())
    adapter: TypeAdapter[TargetConfig] = TypeAdapter(TargetConfig)
    return adapter.validate_python(data)


def swapped_targets(section: UpgradeSection, first: TargetConfig) -> list[TargetConfig]:
    """The target each swap brings in, in order (each from the one before it)."""
    out: list[TargetConfig] = []
    for swap in section.swaps:
        out.append(swapped_config(out[-1] if out else first, swap.target))
    return out


def swap_offsets_s(section: UpgradeSection, phases: list[tuple[str, float]]) -> list[float]:
    """Each swap's moment in seconds from the run's start; `phases`: (name, duration_s).
    Raises ValueError naming the swap that is not inside the run or out of order."""
    ends: dict[str, float] = {}
    elapsed = 0.0
    for name, duration_s in phases:
        elapsed += duration_s
        ends[name] = elapsed
    out: list[float] = []
    for i, swap in enumerate(section.swaps):
        if swap.after is not None:
            if swap.after not in ends:
                names = ", ".join(ends)
                raise ValueError(f"swaps.{i}.after: no phase {swap.after!r} (phases: {names})")
            at_s = ends[swap.after]
        else:
            at_s = float(swap.at or 0.0)
        if at_s >= elapsed:
            raise ValueError(
                f"swaps.{i}: at {at_s:g} s is not before the run's end ({elapsed:g} s)"
            )
        if out and at_s <= out[-1]:
            raise ValueError(f"swaps.{i}: at {at_s:g} s is not after the swap before it")
        out.append(at_s)
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
    swaps = [
        s.model_copy(update={"at": float(max(1, round(s.at * factor)))}) if s.at is not None else s
        for s in section.swaps
    ]
    return section.model_copy(update={"swaps": swaps})
