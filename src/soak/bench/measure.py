"""One measured load run, or one knee step, with the target's and the generator's CPU.

CPU comes from /proc: the target's process tree (utime + stime of its PID and
descendants: docker's init and the server under it) and the generator's own
processes (this one and the builtin engine's workers; dnsperf through
RUSAGE_CHILDREN once it has been reaped). Rates and CPU are taken over the
same steady interval, after a ramp-in second that is not measured.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from soak.bench.cpu import CpuSnapshot, CpuUse, children_cpu_s, processes_cpu
from soak.bench.knee import Step
from soak.bench.limits import Limit, cpu_us_per_query
from soak.clock import NS_PER_S
from soak.load.generator import LoadRunner
from soak.load.ledger import Window, empty_window
from soak.load.load_config import LoadConfig
from soak.load.stats import LoadResult

WINDOW_S = 1.0
# Knee steps: the workers' interpreters start within this, then send from the grid's
# second 0; a window leaves its worker at the once-a-second report after its last
# answer (or timeout), so a step waits up to the timeout and this for its windows.
START_LEAD_S = 0.5
WINDOW_WAIT_S = 2.5
CounterReader = Callable[[], dict[str, float]]


@dataclass
class RunMeasure:
    """One run: open loop at offered_qps, or flat out (offered_qps 0)."""

    offered_qps: float
    duration_s: float
    sent: int
    completed: int
    lost: int
    answered_qps: float
    sent_qps: float
    latency_ms: dict[str, float | None]
    target_cores: float | None
    generator_cores: float | None
    rate_kept: bool
    machine_busy_cores: float | None = None  # every process's, ours and others'
    wrong_answers: int = 0
    rcodes: dict[str, int] = field(default_factory=dict)
    windows: dict[str, list[float]] = field(default_factory=dict)  # per-second values
    counters: dict[str, float] = field(default_factory=dict)  # deltas over the run
    limit: Limit | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def lost_ratio(self) -> float:
        return self.lost / self.sent if self.sent else 0.0

    @property
    def cpu_us_per_query(self) -> float | None:
        return cpu_us_per_query(self.target_cores, self.answered_qps)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["lost_ratio"] = self.lost_ratio
        out["cpu_us_per_query"] = self.cpu_us_per_query
        out["limit"] = asdict(self.limit) if self.limit else None
        return out


@dataclass(frozen=True)
class MeasureSetup:
    """What every measurement needs: the load, where it goes, whose CPU is the target's,
    and the target's own counters to read before and after (None: not read)."""

    cfg: LoadConfig
    server: tuple[str, int]
    base_dir: Path
    target_pid: int | None
    allow_targets: Sequence[str] = ()
    counters: CounterReader | None = None

    def read_counters(self) -> dict[str, float]:
        return self.counters() if self.counters else {}

    def runner(self) -> LoadRunner:
        return LoadRunner(
            self.cfg, self.server, base_dir=self.base_dir, allow_targets=self.allow_targets
        )


_FROM_RESULT = ("sent", "completed", "lost", "latency_ms", "rcodes")  # as the engine counted


def _run_measure(
    rate_qps: float, result: LoadResult, cpu: CpuUse, counters: dict[str, float], **rest: Any
) -> RunMeasure:
    """A RunMeasure from what every engine reports; `rest` is what each measures its own way."""
    copied = {name: getattr(result, name) for name in _FROM_RESULT}
    return RunMeasure(
        offered_qps=rate_qps,
        target_cores=cpu.target_cores,
        generator_cores=cpu.generator_cores,
        machine_busy_cores=cpu.machine_busy_cores,
        counters=counters,
        **copied,
        **rest,
    )


def _deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in after if k in before}


def _sleep_until(deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)


def measure_builtin(
    setup: MeasureSetup, rate_qps: float, duration_s: float, *, ramp_s: float = WINDOW_S
) -> RunMeasure:
    """The builtin engine: per-second windows, CPU over the steady interval."""
    runner, target_pid = setup.runner(), setup.target_pid
    runner.start(rate_qps, ramp_s + duration_s + 5.0)
    generator = processes_cpu(lambda: runner.pids)
    windows: dict[str, list[float]] = {
        "answered_qps": [],
        "p50_ms": [],
        "p99_ms": [],
        "target_cores": [],
    }
    completed = sent = 0
    seconds = 0.0  # grid seconds of the windows closed in the measured steps
    try:
        _sleep_until(time.monotonic() + ramp_s)
        runner.take_window()
        c0 = setup.read_counters()
        before = CpuSnapshot.take(target_pid, generator)
        step_s = min(WINDOW_S, duration_s)
        prev = before
        for i in range(max(1, math.ceil(duration_s / step_s))):
            _sleep_until(before.at_s + min((i + 1) * step_s, duration_s))
            w = runner.take_window().get("all", {})
            # the server's CPU second by second too: samples for `soak compare`
            now = CpuSnapshot.take(target_pid)
            if (busy := prev.until(now).target_cores) is not None:
                windows["target_cores"].append(busy)
            prev = now
            window_s = runner.last_window_s  # the grid seconds whose windows closed
            if w and window_s > 0:  # else no window closed in this step
                completed, sent, seconds = _add_window(
                    windows, w, window_s, (completed, sent, seconds)
                )
        cpu = before.until(CpuSnapshot.take(target_pid, generator))
        c1 = setup.read_counters()
        # A second's window closes once its last query is answered or timed out: with a
        # query lost in the last seconds (a busy machine), their windows close up to the
        # timeout after the interval. Without them a short run had no window at all and
        # read 0 q/s with 52,210 answered; so wait for them (the load is still running).
        deadline_s = time.monotonic() + setup.cfg.timeout_s + WINDOW_WAIT_S
        while seconds < math.floor(duration_s) and time.monotonic() < deadline_s:
            time.sleep(0.05)
            if (w := runner.take_window().get("all", {})) and runner.last_window_s > 0:
                completed, sent, seconds = _add_window(
                    windows, w, runner.last_window_s, (completed, sent, seconds)
                )
    finally:
        result = runner.stop()
    seconds = seconds or cpu.elapsed_s
    sent_qps = sent / seconds
    return _run_measure(
        rate_qps,
        result,
        cpu,
        _deltas(c0, c1),
        duration_s=cpu.elapsed_s,
        answered_qps=completed / seconds,
        sent_qps=sent_qps,
        rate_kept=rate_qps <= 0 or (sent_qps >= 0.97 * rate_qps and result.skipped == 0),
        wrong_answers=sum(int(c["wrong_answers"]) for c in result.classes.values()),
        windows=windows,
        notes=list(result.notes),
    )


def _add_window(
    windows: dict[str, list[float]],
    w: dict[str, float],
    window_s: float,
    sums: tuple[int, int, float],
) -> tuple[int, int, float]:
    """One step's closed windows into the per-window samples; the new sums of
    (completed, sent, grid seconds)."""
    completed, sent, seconds = sums
    windows["answered_qps"].append(w["completed"] / window_s)
    for key in ("p50", "p99"):
        if f"lat_{key}_ms" in w:
            windows[f"{key}_ms"].append(w[f"lat_{key}_ms"])
    return completed + int(w["completed"]), sent + int(w["sent"]), seconds + window_s


def measure_dnsperf(setup: MeasureSetup, rate_qps: float, duration_s: float) -> RunMeasure:
    """dnsperf: one summary per run (no per-second windows, no percentiles)."""
    from soak.load.dnsperf import run_dnsperf

    c0 = setup.read_counters()
    before = CpuSnapshot.take(setup.target_pid, children_cpu_s)
    result: LoadResult = run_dnsperf(
        setup.cfg, setup.server, duration_s, rate_qps, setup.base_dir, setup.allow_targets
    )
    cpu = before.until(CpuSnapshot.take(setup.target_pid, children_cpu_s))
    c1 = setup.read_counters()
    return _run_measure(
        rate_qps,
        result,
        cpu,
        _deltas(c0, c1),
        duration_s=result.duration_s,
        answered_qps=result.qps,
        sent_qps=result.achieved_rate,
        rate_kept=not result.generator_bound,
        windows={"answered_qps": [result.qps]},
        notes=["dnsperf reports no percentiles; p50 is its average"],
    )


class KneeStepper:
    """Knee steps on one running builtin LoadRunner: set the rate, settle, measure."""

    def __init__(self, setup: MeasureSetup, *, max_duration_s: float) -> None:
        self.runner = setup.runner()
        self.runner.keep_ledger = True  # a step is the windows due in its seconds
        self.target_pid = setup.target_pid
        self.generator = processes_cpu(lambda: self.runner.pids)
        self.workers = setup.cfg.workers
        self.timeout_s = setup.cfg.timeout_s
        self.max_duration_s = max_duration_s
        self.started = False
        self.origin_s = 0.0  # time.monotonic() of the grid's second 0

    def step(self, rate_qps: float, step_s: float, settle_s: float) -> Step:
        """The new rate from a whole second of the grid on; measured are the windows due
        in the whole seconds after `settle_s`, `step_s` of them (at least one)."""
        now_s = time.monotonic()
        if not self.started:
            self.origin_s = now_s + START_LEAD_S
            self.runner.start(rate_qps, self.max_duration_s, begin_at_s=self.origin_s)
            self.started = True
            change = 0
        else:
            change = math.ceil(now_s - self.origin_s + 0.05)
            self.runner.set_rate(rate_qps, after_origin_ns=change * NS_PER_S)
        first = change + math.ceil(settle_s)
        last = first + max(1, math.ceil(step_s))  # exclusive
        _sleep_until(self.origin_s + first)
        before = CpuSnapshot.take(self.target_pid, self.generator)
        _sleep_until(self.origin_s + last)
        cpu = before.until(CpuSnapshot.take(self.target_pid, self.generator))
        window = self._windows(first, last)
        fields = self.runner.window_fields(window)["all"]
        seconds = last - first
        return Step(
            offered_qps=rate_qps,
            sent_qps=fields["sent"] / seconds,
            answered_qps=fields["completed"] / seconds,
            p50_ms=fields.get("lat_p50_ms"),
            p99_ms=fields.get("lat_p99_ms"),
            target_cores=cpu.target_cores,
            generator_cores=cpu.generator_cores,
        )

    def _windows(self, first: int, last: int) -> Window:
        """The windows due in seconds [first, last), added up, once each has closed (its
        queries answered or timed out); windows of other seconds are let go."""
        total = empty_window(first, len(self.runner.names))
        seen: set[int] = set()
        deadline_s = self.origin_s + last + self.timeout_s + WINDOW_WAIT_S
        while len(seen) < last - first and time.monotonic() < deadline_s:
            for w in self.runner.take_ledger():
                if first <= w.second < last:
                    seen.add(w.second)
                    w.second = first  # added into one window of the step's seconds
                    total.add(w)
            if len(seen) < last - first:
                time.sleep(0.05)
        return total

    def recover(self, rate_qps: float, pause_s: float) -> None:
        if self.started:
            self.runner.set_rate(rate_qps)
            _sleep_until(time.monotonic() + pause_s)

    def close(self) -> None:
        if self.started:
            self.runner.stop()


def dnsperf_step(setup: MeasureSetup, rate_qps: float, step_s: float) -> Step:
    run = measure_dnsperf(setup, rate_qps, step_s)
    return Step(
        offered_qps=rate_qps,
        sent_qps=run.sent_qps,
        answered_qps=run.answered_qps,
        p50_ms=run.latency_ms.get("avg"),
        target_cores=run.target_cores,
        generator_cores=run.generator_cores,
    )
