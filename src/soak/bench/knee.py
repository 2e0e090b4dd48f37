"""The saturation knee: dnsmark's dichotomic saturation discovery, as a pure state machine.

    search = KneeSearch(cfg, floor_p50_ms)      # floor: p50 at an idle rate
    while (rate := search.next_rate()) is not None:
        search.record(measure(rate))            # the runner does the I/O
    result = search.result()

Rising phase: open-loop rates from `start_rate_qps`, times `factor`, until a
step fails (p50 above the SLO, or fewer than `answered_ratio_min` of the
offered queries answered, or the generator could not offer the rate).
Bisection: the midpoint of the last passing and the first failing rate,
until the bracket is narrower than `tolerance` of its low edge.
p50 is the signal, not p99: a few slow forwarded misses make the tail long
at any rate; the median moves when the server queues.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from soak.config.bench import KneeConfig


@dataclass(frozen=True)
class Step:
    offered_qps: float
    sent_qps: float
    answered_qps: float
    p50_ms: float | None
    p99_ms: float | None = None
    target_cores: float | None = None
    generator_cores: float | None = None


@dataclass
class JudgedStep:
    step: Step
    ok: bool
    why: str  # the failing signal, "" when ok

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self.step), "ok": self.ok, "why": self.why}


@dataclass
class KneeResult:
    floor_p50_ms: float | None
    slo_p50_ms: float
    capacity_qps: float  # the most answered per second in any step
    within_slo_qps: float  # the highest offered rate that passed
    low_qps: float  # knee bracket
    high_qps: float | None  # None: no step failed up to max_rate_qps
    knee_qps: float  # the bracket's midpoint (its low edge when unbounded)
    generator_bound: bool  # the search ended because the generator could not offer more
    steps: list[JudgedStep] = field(default_factory=list)

    @property
    def width_pct(self) -> float | None:
        if self.high_qps is None or self.low_qps <= 0:
            return None
        return 100.0 * (self.high_qps - self.low_qps) / self.low_qps

    def to_json(self) -> dict[str, Any]:
        return {
            "floor_p50_ms": self.floor_p50_ms,
            "slo_p50_ms": self.slo_p50_ms,
            "capacity_qps": self.capacity_qps,
            "within_slo_qps": self.within_slo_qps,
            "knee_low_qps": self.low_qps,
            "knee_high_qps": self.high_qps,
            "knee_qps": self.knee_qps,
            "width_pct": self.width_pct,
            "generator_bound": self.generator_bound,
            "steps": [s.to_json() for s in self.steps],
        }


def auto_slo_ms(floor_p50_ms: float) -> float:
    """dnsmark's SLO on p50: max(3 x floor, floor + 1 ms)."""
    return max(3.0 * floor_p50_ms, floor_p50_ms + 1.0)


def judge(step: Step, slo_ms: float, answered_ratio_min: float) -> tuple[bool, str]:
    if step.sent_qps < 0.97 * step.offered_qps:
        return False, "generator"
    if step.answered_qps < answered_ratio_min * step.offered_qps:
        return False, "answered"
    if step.p50_ms is None or step.p50_ms > slo_ms:
        return False, "p50"
    return True, ""


class KneeSearch:
    def __init__(self, cfg: KneeConfig, floor_p50_ms: float | None) -> None:
        self.cfg = cfg
        self.floor_p50_ms = floor_p50_ms
        if cfg.slo_p50_ms is not None:
            self.slo_ms = cfg.slo_p50_ms
        else:
            self.slo_ms = auto_slo_ms(floor_p50_ms if floor_p50_ms is not None else 0.0)
        self.steps: list[JudgedStep] = []
        self.low = 0.0  # the highest passing rate
        self.high: float | None = None  # the lowest failing rate
        self._rising = True
        self._next: float | None = min(cfg.start_rate_qps, cfg.max_rate_qps)
        self._generator_stop = False

    def next_rate(self) -> float | None:
        if len(self.steps) >= self.cfg.max_steps:
            return None
        return self._next

    def record(self, step: Step) -> None:
        ok, why = judge(step, self.slo_ms, self.cfg.answered_ratio_min)
        self.steps.append(JudgedStep(step, ok, why))
        rate = step.offered_qps
        if ok:
            self.low = max(self.low, rate)
        elif self.high is None or rate < self.high:
            self.high = rate
        if why == "generator":
            # Below a rate the generator could not offer, the steps would measure
            # the generator, not the server: say so and stop.
            self._generator_stop = True
        self._next = self._choose(ok, rate)

    def _choose(self, ok: bool, rate: float) -> float | None:
        if self._rising and ok:
            if rate >= self.cfg.max_rate_qps:
                return None
            return min(rate * self.cfg.factor, self.cfg.max_rate_qps)
        self._rising = False
        if self._generator_stop or self.high is None:
            return None
        if self.low <= 0:  # the first step failed: look lower, down to the idle rate
            if self.high <= self.cfg.idle_rate_qps:
                return None
            return max(self.cfg.idle_rate_qps, self.high / self.cfg.factor)
        if self.high - self.low <= self.cfg.tolerance * self.low:
            return None
        return (self.low + self.high) / 2

    def result(self) -> KneeResult:
        answered = [s.step.answered_qps for s in self.steps]
        if self.high is None:
            knee = self.low
        else:
            knee = (self.low + self.high) / 2 if self.low > 0 else 0.0
        return KneeResult(
            floor_p50_ms=self.floor_p50_ms,
            slo_p50_ms=self.slo_ms,
            capacity_qps=max(answered, default=0.0),
            within_slo_qps=self.low,
            low_qps=self.low,
            high_qps=self.high,
            knee_qps=knee,
            generator_bound=self._generator_stop,
            steps=list(self.steps),
        )
