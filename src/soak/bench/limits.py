"""Who limited a run: the generator, the machine both share, or the server. Pure.

The DNZ seed says aloud when the load generator is the ceiling; so does
every bench row here. Inputs are CPU cores used over the measured interval
(from /proc) and the cores each side may use.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    kind: str  # "generator", "machine", "server" or "" (nothing saturated: open loop held)
    reason: str


def judge_limit(
    *,
    generator_cores: float | None,
    generator_capacity_cores: float,
    target_cores: float | None,
    target_capacity_cores: float | None = None,
    machine_cores: int,
    machine_busy_cores: float | None = None,
    rate_kept: bool = True,
    saturated_ratio: float = 0.85,
    flat_out: bool = False,
) -> Limit:
    """The limit of one run.

    - generator: it could not send the open-loop rate, or its own CPU is
      saturated, or (flat out) the server sat mostly idle while it did not;
    - machine: (nearly) every CPU of the machine was busy, with the generator,
      the server, or other processes: neither figure is the server's alone;
    - server: a flat-out run with the server's CPUs saturated;
    - "": nothing saturated (open loop that held; or flat out bound by latency).
    """
    gen = generator_cores or 0.0
    gen_util = gen / generator_capacity_cores if generator_capacity_cores > 0 else 0.0
    if not rate_kept:
        return Limit("generator", "the generator could not send the offered rate")
    if generator_cores is not None and gen_util >= saturated_ratio:
        return Limit(
            "generator",
            f"generator CPU saturated ({gen:.2f} of {generator_capacity_cores:g} cores)",
        )
    if target_cores is None:
        return Limit("", "target CPU unknown")
    cap = target_capacity_cores or float(machine_cores)
    target_util = target_cores / cap
    if flat_out and target_util < 0.5 and gen_util >= 0.6 and gen_util > target_util + 0.25:
        return Limit(
            "generator",
            f"server mostly idle ({target_cores:.2f} of {cap:g} cores) while the generator "
            f"is busy ({gen:.2f} of {generator_capacity_cores:g} cores)",
        )
    ours = gen + target_cores
    total = max(ours, machine_busy_cores or 0.0)
    if total >= saturated_ratio * machine_cores:
        others = f", other processes {total - ours:.2f}" if total - ours >= 0.05 else ""
        return Limit(
            "machine",
            f"the machine's {machine_cores} CPUs were busy ({total:.2f} cores: generator "
            f"{gen:.2f}, server {target_cores:.2f}{others})",
        )
    if flat_out and target_util >= saturated_ratio:
        return Limit("server", f"server CPU saturated ({target_cores:.2f} of {cap:g} cores)")
    if flat_out:
        return Limit(
            "",
            f"no CPU saturated (server {target_cores:.2f} of {cap:g} cores, generator "
            f"{gen:.2f} of {generator_capacity_cores:g}): bound by latency x outstanding",
        )
    return Limit("", "")


def cpu_us_per_query(target_cores: float | None, answered_qps: float) -> float | None:
    """Server CPU time per answered query, in µs (the kudurru seed's ~100 µs / ~28 µs)."""
    if target_cores is None or answered_qps <= 0:
        return None
    return target_cores / answered_qps * 1e6
