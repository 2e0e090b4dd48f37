"""Execution segments: a load config's rate split among N agents, as k6 splits its VUs.

Agent i of N owns the segment [i/N, (i+1)/N) of the run. The rate is split in
equal parts (R / N each) and agent i takes its place i / N in each of its workers'
periods (agent_phase), so the agents' queries interleave: together they are due
query m at m / R, exactly R x D in D seconds (whatever each agent's worker count).
Whole quantities (flows, workers) are split by the segment's boundaries,
`floor(total * (i+1) / N) - floor(total * i / N)`, so the shares sum exactly to
the total and differ by at most one unit. Random names are seeded per agent, so
two agents never walk the same name sequence.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from soak.errors import InputError
from soak.load.load_config import LoadConfig


@dataclass(frozen=True)
class Segment:
    """Agent `index` of `count` (0-based)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise InputError(f"segment {self.index}/{self.count}: need 0 <= index < count")

    @classmethod
    def parse(cls, text: str) -> Segment:
        """`i/N` as given to `soak agent --segment`."""
        index, sep, count = text.partition("/")
        if not sep or not index.strip().isdigit() or not count.strip().isdigit():
            raise InputError(f"--segment: expected INDEX/COUNT (e.g. 0/3), got {text!r}")
        return cls(int(index), int(count))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def share(self, total: int) -> int:
        """This segment's part of a whole quantity; the parts of 0..N-1 sum to total."""
        lo = total * self.index // self.count
        hi = total * (self.index + 1) // self.count
        return hi - lo


def rate_share_qps(rate_qps: float, parts: int) -> float:
    """One of `parts` equal parts of a rate: a segment's of the run's (parts: the agents'
    count), a worker's of its runner's (parts: the workers). The one place a rate is
    divided. Equal parts interleave (agent_phase, worker_phase), so that together they
    are due exactly R x D; unequal ones (the rate split to the milli-q/s, as once) could
    not: N agents each starting its own schedule were due up to N - 1 queries more."""
    return rate_qps / parts


def agent_phase(segment: Segment) -> float:
    """The agent's place in each of its workers' periods (soak.load.worker.worker_phase):
    the agents' queries interleave, so that together they are due exactly the run's
    rate x seconds (not up to count - 1 more, as when each started at the origin)."""
    return segment.index / segment.count


def agent_seed(seed: int, segment: Segment) -> int:
    """A seed of its own for each agent, derived from the run's (repeatable)."""
    digest = hashlib.sha256(f"soak-agent:{seed}:{segment.index}".encode()).digest()
    return int.from_bytes(digest[:6], "big")


def segment_config(cfg: LoadConfig, segment: Segment, seed: int) -> LoadConfig:
    """The load config agent `segment` runs: its rate, flows, workers and seed.

    `seed` is the run's (a config without one gets it from the coordinator, so
    that every agent derives from the same value). Flows and workers are split
    too (each agent keeps at least one); with rate 0 (flat out) each agent
    keeps its share of `max_outstanding`.
    """
    data = cfg.model_dump(exclude={"agents"})
    data.update(
        rate_qps=rate_share_qps(cfg.rate_qps, segment.count),
        flows=max(1, segment.share(cfg.flows)),
        workers=max(1, segment.share(cfg.workers)),
        max_outstanding=max(1, segment.share(cfg.max_outstanding)),
        seed=agent_seed(seed, segment),
    )
    return LoadConfig.model_validate(data)


def all_segments(count: int) -> list[Segment]:
    return [Segment(i, count) for i in range(count)]
