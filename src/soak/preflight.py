"""What a scenario refers to, checked in full before anything starts.

A run that starts its helpers and then finds a bad line in a query file leaves
processes to stop and a user waiting for nothing. These checks read every file a
scenario names (query files parsed line by line, templates read as text) and weigh
its rates against what the load engine can send, so that bad input is one line and
exit 2 before the first process starts. `soak start` runs them before it submits or
starts; the service runs them again before it accepts a run.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from soak.config import Scenario
from soak.errors import InputError
from soak.load.config import LoadConfig
from soak.targets.config import TargetConfig

# What one load worker can send at most, by protocol: above the best this engine has
# measured (docs/benchmarks.md, "compiled UDP loop": 222,806 q/s over UDP and 96,509 q/s
# over TCP with one worker against a server answering from cache, on two cores). A
# rate above `workers` times this cannot be sent; the run would end with a
# `lost_ratio` failure that is the generator's, not the server's.
# DoT and DoH ride on TCP and add TLS (and HTTP/2): the TCP figure bounds them too.
WORKER_MAX_QPS = {"udp": 250_000.0, "tcp": 100_000.0, "dot": 100_000.0, "doh": 100_000.0}


def check_scenario(scenario: Scenario) -> None:
    """Raise InputError (one line) for the first problem found; read-only."""
    if scenario.load is not None:
        refuse_agents(scenario.load, "a soak run by the service")
        check_load(scenario.load, scenario.base_dir, phase_rates(scenario))
    for target in [scenario.target, *scenario.services]:
        check_target_files(target, scenario.base_dir)


def refuse_agents(load: LoadConfig, who: str) -> None:
    """`load.agents` is run by `soak load` only so far: elsewhere it is refused, not ignored."""
    if load.agents is not None:
        raise InputError(
            f"load.agents: {who} does not start load agents yet; `soak load --scenario` does "
            "(docs/scale.md)"
        )


def phase_rates(scenario: Scenario) -> list[tuple[str, float]]:
    """(where, q/s) of every phase: its own rate, or the load's."""
    assert scenario.load is not None
    return [
        (f"phases.{i}.rate_qps", p.rate_qps)
        if p.rate_qps is not None
        else ("load.rate_qps", scenario.load.rate_qps)
        for i, p in enumerate(scenario.phases)
    ]


def check_load(load: LoadConfig, base_dir: Path, rates: Iterable[tuple[str, float]]) -> None:
    from soak.load.queries import build_classes

    build_classes(load.mix, base_dir, seed=0)  # every file read and every line parsed
    for where, rate_qps in rates:
        problem = rate_problem(rate_qps, load.workers, load.protocol)
        if problem is not None:
            raise InputError(f"{where}: {problem}")


def rate_problem(rate_qps: float, workers: int, protocol: str) -> str | None:
    """Why a rate cannot be sent by `workers` workers, or None (0 is flat out)."""
    ceiling_qps = workers * WORKER_MAX_QPS[protocol]
    if rate_qps <= ceiling_qps:
        return None
    return (
        f"{rate_qps:,.0f} q/s is more than {workers} load worker(s) can send over"
        f" {protocol.upper()} (at most {ceiling_qps:,.0f} q/s,"
        f" {WORKER_MAX_QPS[protocol]:,.0f} per worker); lower the rate or raise load.workers"
    )


def check_target_files(target: TargetConfig, base_dir: Path) -> None:
    from soak.targets.render import file_text

    for spec in target.files:
        file_text(spec, base_dir)  # InputError if unreadable or not text
