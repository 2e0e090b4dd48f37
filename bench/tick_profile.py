"""Where a 1-s tick's time goes: a short refdns soak with every sampler, timed per part.

    .venv/bin/python bench/tick_profile.py [--hog 2] [--steady 40]
    .venv/bin/python bench/tick_profile.py --smoke     # 2-s warm-up, 3 s steady

Runs scenarios/refdns-demo.yaml in the foreground, in this process (20-s warm-up,
`--steady` seconds steady), with proc + prom + three API calls + two dig probes +
files at 1-s ticks, and `--hog` busy `yes > /dev/null` processes beside it. Each
part of each tick is timed from outside (the tick job as a whole, the samplers'
run, each sampler, the writes) and the lag of the tick's start behind its grid
time; the table gives p50, p99 and max in ms, and the run's tick accounting
(ticks stored, ticks recorded missed, sampler events by kind).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from soak.clock import ns_to_s  # noqa: E402
from soak.config import load_scenario  # noqa: E402
from soak.runs import parts as parts_mod  # noqa: E402
from soak.runs import run as run_mod  # noqa: E402
from soak.runs import supervise as supervise_mod  # noqa: E402
from soak.samplers import tick as tick_mod  # noqa: E402
from soak.service.foreground import run_foreground  # noqa: E402
from soak.sinks.sqlite import SqliteStore  # noqa: E402

TIMES: dict[str, list[float]] = defaultdict(list)


def _timed(owner: type, name: str, label: str) -> None:
    inner = getattr(owner, name)

    def wrapper(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        t0 = time.monotonic()
        try:
            return inner(self, *args, **kwargs)
        finally:
            TIMES[label].append(time.monotonic() - t0)

    setattr(owner, name, wrapper)


def _instrument() -> None:
    _timed(run_mod.Run, "tick", "tick job (whole)")
    _timed(parts_mod.RunParts, "write", "  write points (sqlite)")
    _timed(supervise_mod.Supervisor, "check_target", "  check target")
    _timed(supervise_mod.Supervisor, "check_load", "  supervise load")
    _timed(run_mod.Run, "analyse", "leak analysis job")
    _timed(tick_mod.TickRunner, "run_tick", "  samplers (run_tick)")
    original = tick_mod.sample_once

    def sample_once(sampler, tick_time_ns, clock=time.monotonic):  # type: ignore[no-untyped-def]
        lag = time.time_ns() - tick_time_ns
        TIMES["  sampler start lag"].append(ns_to_s(lag))
        out = original(sampler, tick_time_ns, clock)
        TIMES[f"    sampler {sampler.name}"].append(out[1])
        return out

    tick_mod.sample_once = sample_once  # run_tick looks it up in its module at each tick


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hog", type=int, default=0, help="busy `yes` processes beside the soak")
    ap.add_argument("--steady", type=float, default=40.0)
    ap.add_argument("--smoke", action="store_true", help="seconds: that it still runs")
    args = ap.parse_args()
    warmup_s = 2.0 if args.smoke else 20.0
    if args.smoke:
        args.steady = 3.0
    _instrument()
    sets = {
        "phases.0.duration_s": f"{warmup_s:g}s",
        "phases.1.duration_s": f"{args.steady:g}s",
        "target.argv.5": "-cache-entries=1000",
        "target.argv.6": "-querylog-max-rows=10000",
        "criteria.p99_ms_max": "{all: 1000}",
        "criteria.api_latency_ms_max": "{}",
    }
    overrides = [f"{k}={v}" for k, v in sets.items()]
    scenario = load_scenario(ROOT / "scenarios" / "refdns-demo.yaml", overrides)
    hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(args.hog)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            status = run_foreground(scenario, Path(tmp), as_json=True)
            store = SqliteStore(Path(tmp) / "points.db")
            try:
                stored = store.series(status["id"], "process", "rss_bytes")
                ticks = len(stored[0][1]) if stored else 0
                lost = Counter(
                    f"{p.tags.get('kind')} {p.tags.get('sampler', '')}".strip()
                    for p in store.points(status["id"], "event")
                    if p.tags.get("kind") in ("sampler_timeout", "sampler_overrun", "tick_overrun")
                )
            finally:
                store.close()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    kinds = Counter(e["kind"] for e in status["events"])
    missed = sum(
        int(float(e.get("value", 0))) for e in status["events"] if e["kind"] == "ticks_missed"
    )
    print(f"\nhog processes: {args.hog}; status {status['status']}")
    print(f"ticks with a process sample: {ticks}; ticks recorded missed: {missed}")
    print("events: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    print("samples lost: " + (", ".join(f"{k} {n}" for k, n in sorted(lost.items())) or "none"))
    for e in status["events"]:
        if e["kind"] == "ticks_missed":
            print(f"  ticks_missed: {e['message']}")
    print("| part | n | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|")
    for label, values in TIMES.items():
        if values:
            print(
                f"| {label} | {len(values)} | {statistics.median(values) * 1e3:.0f} "
                f"| {pct(values, 0.99) * 1e3:.0f} | {max(values) * 1e3:.0f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
