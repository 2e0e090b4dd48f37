"""The benchmark loop: per query class, fresh target, warm pass, throwaway, measured runs,
the saturation knee and fixed rates, for one side or two sides in turns."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from soak.analysis.stats import median, summarise
from soak.bench.cpu import target_capacity_cores
from soak.bench.knee import KneeSearch, Step
from soak.bench.limits import judge_limit
from soak.bench.measure import (
    CounterReader,
    KneeStepper,
    MeasureSetup,
    RunMeasure,
    dnsperf_step,
    measure_builtin,
    measure_dnsperf,
)
from soak.bench.side import Side
from soak.config.bench import BenchConfig, KneeConfig
from soak.errors import InputError
from soak.load.load_config import LoadConfig, QueryClass
from soak.load.oneshot import run_load
from soak.load.queries import class_questions

MIX = "mix"
Echo = Callable[[str], None]


def _setup(side: Side, cfg: LoadConfig, counters: CounterReader | None = None) -> MeasureSetup:
    return MeasureSetup(
        cfg,
        side.server(),
        base_dir=side.scenario.base_dir,
        target_pid=side.pid,
        allow_targets=tuple(side.scenario.allow_targets),
        counters=counters,
    )


def plan_classes(load: LoadConfig, cfg: BenchConfig, engine: str) -> list[str]:
    """Each class alone, then the mix (the dnsperf engine takes one class at a time)."""
    names = [c.name for c in load.mix]
    chosen = cfg.classes if cfg.classes is not None else names
    unknown = [n for n in chosen if n not in names and n != MIX]
    if unknown:
        raise InputError(f"bench.classes: no such class {unknown[0]!r} (have {', '.join(names)})")
    plan = [n for n in chosen if n != MIX]
    wants_mix = MIX in chosen if cfg.classes is not None else cfg.mix
    if wants_mix and len(names) > 1 and engine == "builtin":
        plan.append(MIX)
    return plan


def class_config(load: LoadConfig, name: str, engine: str) -> LoadConfig:
    mix = list(load.mix) if name == MIX else [c for c in load.mix if c.name == name]
    if engine == "dnsperf":
        mix = [c.model_copy(update={"expect": None}) for c in mix]
    return load.model_copy(update={"mix": mix, "engine": engine})


def _corpus_size(qc: QueryClass, side: Side) -> int:
    return len(class_questions(qc, side.scenario.base_dir)) if qc.random is None else 0


class Bench:
    def __init__(self, sides: list[Side], cfg: BenchConfig, engine: str, echo: Echo) -> None:
        self.sides = sides
        self.cfg = cfg
        self.engine = engine
        self.echo = echo
        self.machine_cores = len(os.sched_getaffinity(0))
        self.results: dict[str, list[dict[str, Any]]] = {s.label: [] for s in sides}

    # ------------------------------------------------------------ the loop

    def run(self) -> dict[str, list[dict[str, Any]]]:
        load = self.sides[0].scenario.load
        assert load is not None
        fixed = self.cfg.fixed_classes
        for index, name in enumerate(plan_classes(load, self.cfg, self.engine)):
            rows = {s.label: self._class_row(s, name) for s in self.sides}
            for side in self.sides:
                if index > 0 and not self.cfg.warm:
                    self.echo(f"{side.label}: {name}: fresh start of the target")
                    side.restart()
                self._warm(side, name, rows[side.label])
            self._saturation(name, rows)
            if self.cfg.knee.enabled:
                for side in self.sides:
                    rows[side.label]["knee"] = self._knee(side, name)
            if self.cfg.rates_qps and (fixed is None or name in fixed):
                self._fixed(name, rows)
            for side in self.sides:
                self.results[side.label].append(rows[side.label])
        return self.results

    def _class_row(self, side: Side, name: str) -> dict[str, Any]:
        return {"name": name, "fresh": not self.cfg.warm or side.starts == 1, "notes": []}

    def _warm(self, side: Side, name: str, row: dict[str, Any]) -> None:
        """Every name of the class's corpus asked (at least) once; random names cannot be."""
        load = side.scenario.load
        assert load is not None
        classes = load.mix if name == MIX else [c for c in load.mix if c.name == name]
        asked = 0
        for qc in classes:
            size = _corpus_size(qc, side)
            if size == 0:
                row["notes"].append(f"{qc.name}: random names, no warm pass")
                continue
            one = load.model_copy(update={"mix": [qc], "engine": "builtin", "workers": 1})
            duration_s = max(0.5, size / self.cfg.warm_rate_qps)
            self.echo(f"{side.label}: {name}: warm pass over {size} names of {qc.name}")
            run_load(
                one,
                side.server(),
                duration_s,
                self.cfg.warm_rate_qps,
                base_dir=side.scenario.base_dir,
                allow_targets=tuple(side.scenario.allow_targets),
            )
            asked += size
        row["warm_names"] = asked

    # ------------------------------------------------------------ measurements

    def _measure(self, side: Side, name: str, rate_qps: float, duration_s: float) -> RunMeasure:
        load = side.scenario.load
        assert load is not None
        cfg = class_config(load, name, self.engine)
        measure = measure_dnsperf if self.engine == "dnsperf" else measure_builtin
        run = measure(_setup(side, cfg, counters=side.counters), rate_qps, duration_s)
        side.check_alive()
        run.limit = judge_limit(
            generator_cores=run.generator_cores,
            generator_capacity_cores=min(cfg.workers, self.machine_cores),
            target_cores=run.target_cores,
            target_capacity_cores=target_capacity_cores(
                side.pid, self.cfg.target_cores, getattr(side.scenario.target, "cpus", None)
            ),
            machine_cores=self.machine_cores,
            machine_busy_cores=run.machine_busy_cores,
            rate_kept=run.rate_kept,
            saturated_ratio=self.cfg.cpu_saturated_ratio,
            flat_out=rate_qps <= 0,
        )
        return run

    def _saturation(self, name: str, rows: dict[str, dict[str, Any]]) -> None:
        if self.cfg.throwaway_s > 0:
            for side in self.sides:
                self.echo(f"{side.label}: {name}: throwaway run ({self.cfg.throwaway_s:g} s)")
                self._measure(side, name, self._flat_out_qps, self.cfg.throwaway_s)
        runs: dict[str, list[RunMeasure]] = {s.label: [] for s in self.sides}
        for i in range(self.cfg.runs):
            for side in self.sides:  # in turns: both sides see the same noisy machine
                run = self._measure(side, name, self._flat_out_qps, self.cfg.duration_s)
                self.echo(
                    f"{side.label}: {name}: run {i + 1}/{self.cfg.runs}: "
                    f"{run.answered_qps:,.0f} q/s answered"
                )
                runs[side.label].append(run)
        for side in self.sides:
            rows[side.label]["saturation"] = saturation_summary(runs[side.label])

    @property
    def _flat_out_qps(self) -> float:
        """Saturation's rate: 0 (flat out), or the cap `max_rate_qps` (open loop at it)."""
        return self.cfg.max_rate_qps or 0.0

    def _knee(self, side: Side, name: str) -> dict[str, Any]:
        kcfg = capped_knee(self.cfg)
        load = side.scenario.load
        assert load is not None
        cfg = class_config(load, name, self.engine)
        per_step_s = kcfg.step_s + max(kcfg.settle_s, 1.1)
        # The builtin engine keeps one runner going and changes its rate; dnsperf runs
        # once per step.
        stepper = None
        if self.engine == "builtin":
            stepper = KneeStepper(
                _setup(side, cfg), max_duration_s=(kcfg.max_steps + 2) * per_step_s + 30.0
            )

        def step(rate: float) -> Step:
            if stepper is None:
                return dnsperf_step(_setup(side, cfg), rate, kcfg.step_s)
            return stepper.step(rate, kcfg.step_s, kcfg.settle_s)

        try:
            idle = step(kcfg.idle_rate_qps)
            search = KneeSearch(kcfg, idle.p50_ms)
            while (rate := search.next_rate()) is not None:
                s = step(rate)
                search.record(s)
                side.check_alive()
                if not search.steps[-1].ok and stepper is not None:
                    # Let the queue of an overloaded step drain (and its lost queries
                    # time out) before the next rate is measured.
                    stepper.recover(kcfg.idle_rate_qps, load.timeout_s + kcfg.settle_s)
                self.echo(
                    f"{side.label}: {name}: knee step {rate:,.0f} q/s offered: "
                    f"{s.answered_qps:,.0f} answered, p50 {_ms(s.p50_ms)}"
                )
        finally:
            if stepper is not None:
                stepper.close()
        out = search.result().to_json()
        out["idle_step"] = asdict(idle)
        return out

    def _fixed(self, name: str, rows: dict[str, dict[str, Any]]) -> None:
        for side in self.sides:
            rows[side.label]["fixed"] = []
        for rate in self.cfg.rates_qps:
            for i in range(self.cfg.fixed_runs):
                for side in self.sides:
                    run = self._measure(side, name, rate, self.cfg.fixed_duration_s)
                    p50 = _ms(run.latency_ms.get("p50"))
                    nth = f" ({i + 1}/{self.cfg.fixed_runs})" if self.cfg.fixed_runs > 1 else ""
                    self.echo(f"{side.label}: {name}: fixed {rate:,.0f} q/s{nth}: p50 {p50}")
                    rows[side.label]["fixed"].append(run.to_json())


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} ms"


def saturation_summary(runs: list[RunMeasure]) -> dict[str, Any]:
    """The measured runs of one class: median, best and spread, and what limited them."""
    qps = summarise([r.answered_qps for r in runs])
    avgs = [v for v in (r.latency_ms.get("avg") for r in runs) if v is not None]
    cores = [r.target_cores for r in runs if r.target_cores is not None]
    gen = [r.generator_cores for r in runs if r.generator_cores is not None]
    per_query = [v for v in (r.cpu_us_per_query for r in runs) if v is not None]
    kinds = Counter(r.limit.kind for r in runs if r.limit is not None)
    kind = kinds.most_common(1)[0][0] if kinds else ""
    reason = next((r.limit.reason for r in runs if r.limit and r.limit.kind == kind), "")
    return {
        "qps": asdict(qps),
        "avg_ms": median(avgs) if avgs else None,
        "target_cores": median(cores) if cores else None,
        "generator_cores": median(gen) if gen else None,
        "cpu_us_per_query": median(per_query) if per_query else None,
        "lost": sum(r.lost for r in runs),
        "limit": {"kind": kind, "reason": reason},
        "runs": [r.to_json() for r in runs],
    }


def capped_knee(cfg: BenchConfig) -> KneeConfig:
    """The knee search under the bench's cap: no step (idle, start or bisection) above it."""
    cap = cfg.max_rate_qps
    if cap is None:
        return cfg.knee
    knee = cfg.knee
    return knee.model_copy(
        update={
            "max_rate_qps": min(knee.max_rate_qps, cap),
            "start_rate_qps": min(knee.start_rate_qps, cap),
            "idle_rate_qps": min(knee.idle_rate_qps, cap),
        }
    )
