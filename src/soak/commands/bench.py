"""`soak bench SCENARIO`: the seeds' measurement method against a scenario's target."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from soak.bench.record import bench_dir, host_environment, write_outputs
from soak.bench.render_result import render_text
from soak.config import Scenario, load_scenario
from soak.config.bench import BenchConfig
from soak.errors import InputError
from soak.preflight import refuse_agents
from soak.units import parse_rate_qps


def _parse_rates(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        rates = [parse_rate_qps(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise InputError(f"--rates takes rates separated by commas (1k,2k,4k): {exc}") from None
    if any(r <= 0 for r in rates):
        raise InputError("--rates must be positive")
    return rates


def bench_config(scenario: Scenario, options: dict[str, Any]) -> BenchConfig:
    """The scenario's `bench:` (or the defaults), the command line on top."""
    data = scenario.bench.model_dump() if scenario.bench is not None else {}
    knee = dict(data.get("knee", {}))
    for key, value in options.items():
        if value is None:
            continue
        if key.startswith("knee."):
            knee[key.removeprefix("knee.")] = value
        else:
            data[key] = value
    data["knee"] = knee
    from soak.config import validate_model

    return validate_model(BenchConfig, data, "bench")


@click.command("bench")
@click.argument("scenario", type=click.Path(path_type=Path))
@click.option("--runs", type=int, default=None, help="measured runs per class (default 3)")
@click.option("--duration", type=float, default=None, help="seconds per measured run (20)")
@click.option("--throwaway", type=float, default=None, help="seconds of the throwaway run (10)")
@click.option("--warm", is_flag=True, default=None, help="keep the target warm between classes")
@click.option("--engine", type=click.Choice(["builtin", "dnsperf"]), default=None)
@click.option("--rates", default=None, help="fixed rates, q/s, comma-separated")
@click.option("--fixed-duration", type=float, default=None, help="seconds per fixed rate (10)")
@click.option("--fixed-runs", type=int, default=None, help="runs of each fixed rate (1)")
@click.option("--step", "step_s", type=float, default=None, help="seconds per knee step (5)")
@click.option("--no-knee", is_flag=True, help="skip the saturation knee search")
@click.option("--max-rate", "max_rate", type=float, default=None,
              help="q/s never offered above (saturation and the knee stop there)")  # fmt: skip
@click.option("--classes", default=None, help="classes to run, comma-separated (`mix` too)")
@click.option("--set", "overrides", multiple=True, help="scenario override key.path=value")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None)
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="where bench.json/.md/.html go (default DATA_DIR/bench/ID)")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="print the JSON result")
@click.option("--compare", "compare_with", type=click.Path(path_type=Path), default=None,
              help="a second scenario (B), measured in turns with SCENARIO (A)")  # fmt: skip
@click.option("--compare-set", "compare_sets", multiple=True,
              help="B is SCENARIO (or --compare) with this override key.path=value")  # fmt: skip
@click.option("--threshold", "thresholds", multiple=True,
              help="with --compare: KIND=PERCENT (throughput, latency, cpu, ...)")  # fmt: skip
def bench_cmd(
    scenario: Path,
    runs: int | None,
    duration: float | None,
    throwaway: float | None,
    warm: bool | None,
    engine: str | None,
    rates: str | None,
    fixed_duration: float | None,
    fixed_runs: int | None,
    step_s: float | None,
    no_knee: bool,
    max_rate: float | None,
    classes: str | None,
    overrides: tuple[str, ...],
    data_dir: Path | None,
    out_dir: Path | None,
    as_json: bool,
    compare_with: Path | None,
    compare_sets: tuple[str, ...],
    thresholds: tuple[str, ...],
) -> None:
    """Benchmark SCENARIO's target per query class; exit 1 when a `bench:` criterion fails.

    With --compare / --compare-set, a second target (B) is measured in turns with the
    first (A) and the two are compared; exit 1 also when a figure of B is worse.
    """
    sc = load_scenario(scenario, overrides)
    if sc.load is None:
        raise InputError(f"{scenario}: `soak bench` needs a `load:` section")
    refuse_agents(sc.load, "`soak bench`")
    options: dict[str, Any] = {
        "runs": runs,
        "duration_s": duration,
        "throwaway_s": throwaway,
        "warm": warm,
        "rates_qps": _parse_rates(rates),
        "fixed_duration_s": fixed_duration,
        "fixed_runs": fixed_runs,
        "classes": [c.strip() for c in classes.split(",")] if classes else None,
        "knee.step_s": step_s,
        "knee.enabled": False if no_knee else None,
        "max_rate_qps": max_rate,
    }
    cfg = bench_config(sc, options)
    eng = engine or sc.load.engine
    from soak.bench.loop import plan_classes
    from soak.plans.bench import bench_id, new_side, side_id

    plan_classes(sc.load, cfg, eng)  # bad class names fail before anything starts
    run_id = bench_id(sc)
    started = time.time()
    env = host_environment(eng)
    two = compare_with is not None or bool(compare_sets)
    sides = [new_side("A", sc, side_id(run_id, "A", two))]
    if two:
        from soak.commands.compare import parse_thresholds

        parse_thresholds(thresholds)  # bad input before anything starts
        sc_b = load_scenario(compare_with or scenario, (*overrides, *compare_sets))
        if sc_b.load is None:
            raise InputError(f"{compare_with}: `soak bench` needs a `load:` section")
        refuse_agents(sc_b.load, "`soak bench`")
        plan_classes(sc_b.load, cfg, eng)
        sides.append(new_side("B", sc_b, side_id(run_id, "B", two)))

    def echo(line: str) -> None:
        click.echo(f"soak bench: {line}", err=True)

    root = out_dir or bench_dir(data_dir) / run_id

    def report(results: dict[str, dict[str, Any]]) -> list[str]:
        """Each side's outputs written and shown; the failed criteria (and B worse)."""
        failed: list[str] = []
        for label, result in results.items():
            write_outputs(result, root if len(sides) == 1 else root / label)
            if not as_json:
                click.echo(render_text(result), nl=False)
            failed += [f"{c['name']} ({label})" for c in result["criteria"] if not c["ok"]]
        if len(sides) == 1 and as_json:
            click.echo(json.dumps(results["A"], indent=2))
        if len(sides) == 2:
            failed += _compare(results, thresholds, root, as_json)
        echo(f"results in {root}")
        sys.stdout.flush()
        return failed

    from soak.plans.engine import make_plan, run_plan

    run_plan(make_plan("bench", sides, cfg, eng, run_id, env, started, echo, report))


def _compare(
    results: dict[str, dict[str, Any]], thresholds: tuple[str, ...], root: Path, as_json: bool
) -> list[str]:
    from soak.bench.inputs import from_bench
    from soak.commands.compare import compare_runs, emit, parse_thresholds

    a, b = from_bench(results["A"]), from_bench(results["B"])
    cmp = compare_runs(a, b, parse_thresholds(thresholds))
    text = emit(cmp, a, b, False, root)
    if as_json:
        click.echo(json.dumps({**results, "compare": cmp.to_json()}, indent=2))
    else:
        click.echo(text, nl=False)
    return [f"B worse: {name}" for name in cmp.worse]
