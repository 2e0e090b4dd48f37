"""Execution segments: a load config's rate split among N agents, as k6 splits its VUs.

Agent i of N owns the segment [i/N, (i+1)/N) of the run. Whole quantities (the
rate in milli-q/s, flows, workers) are split by the segment's boundaries,
`floor(total * (i+1) / N) - floor(total * i / N)`, so the shares sum exactly to
the total and differ by at most one unit. Random names are seeded per agent, so
two agents never walk the same name sequence.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from soak.errors import InputError
from soak.load.config import LoadConfig

MILLI = 1000  # rates are split in milli-q/s, so a fractional rate splits exactly too


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


def rate_share_mqps(rate_qps: float, segment: Segment) -> int:
    """The segment's rate in milli-q/s (an integer, so the shares sum exactly)."""
    return segment.share(round(rate_qps * MILLI))


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
    if segment.count > 1 and cfg.rate_qps > 0 and round(cfg.rate_qps * MILLI) < segment.count:
        raise InputError(f"rate {cfg.rate_qps:g} q/s is too small for {segment.count} agents")
    data = cfg.model_dump(exclude={"agents"})
    data.update(
        rate_qps=rate_share_mqps(cfg.rate_qps, segment) / MILLI,
        flows=max(1, segment.share(cfg.flows)),
        workers=max(1, segment.share(cfg.workers)),
        max_outstanding=max(1, segment.share(cfg.max_outstanding)),
        seed=agent_seed(seed, segment),
    )
    return LoadConfig.model_validate(data)


def all_segments(count: int) -> list[Segment]:
    return [Segment(i, count) for i in range(count)]
