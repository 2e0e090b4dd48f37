"""Report of a long run: time and peak memory of build_report and the three renderings.

    .venv/bin/python bench/report_long.py               # 7 days at 1-min ticks, a day at 1-s ticks
    .venv/bin/python bench/report_long.py --smoke       # 20 min at 1-s ticks, not cached

The stores are synthetic runs written through SqliteStore (bench/synthetic_store.py,
cached under /tmp): process (15 fields), runtime (4) and load (15) every tick,
two phases (a 10-min warm-up, then steady), one tick with a 400 MiB RSS spike.
Each case runs in a fresh child process, so the peak is the case's alone: CPU
is the child's CPU time of build + HTML + JSON + Markdown, peak RSS its
ru_maxrss (the interpreter and imports included: about 45 MiB before any work),
and tracemalloc's peak of Python allocations is printed beside it from a
second, traced run. The report must still draw the spike.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from soak.clock import NS_PER_S
from soak.report import PhaseSpan, ReportInput, build_report
from soak.report.render import render_html, render_json, render_markdown
from soak.results.grew import report_section
from soak.sinks.sqlite import SqliteStore
from synthetic_store import RUN_ID, SPIKE_BYTES, START_NS, TAGS, smoke_cache, synthetic_store

S = NS_PER_S
MiB = 1024**2
CASES = {"7 days at 1-min ticks": (10_080, 60.0), "1 day at 1-s ticks": (86_400, 1.0)}
SMOKE_CASES = {"20 min at 1-s ticks": (1_200, 1.0)}


def make_report(ticks: int, step_s: float) -> tuple[int, int, bool]:
    """(HTML bytes, plotted points of the memory plot, spike drawn?)."""
    store = SqliteStore(synthetic_store(ticks, step_s))
    end_ns = START_NS + round((ticks - 1) * step_s * S)
    warm_ns = START_NS + 600 * S
    inp = ReportInput(
        run_id=RUN_ID,
        scenario_name=TAGS["scenario"],
        target_name=TAGS["target"],
        version=TAGS["version"],
        target_desc="synthetic",
        started_ns=START_NS,
        ended_ns=end_ns,
        status="passed",
        phases=[PhaseSpan("warm-up", START_NS, warm_ns, True), PhaseSpan("steady", warm_ns, None)],
        startup={},
        criteria=[],
        verdicts=[],
        host={"name": "bench"},
    )
    report = build_report(store, inp, what_grew=report_section)
    html = render_html(report)
    render_json(report)
    render_markdown(report)
    store.close()
    memory = next(p for p in report["plots"] if p["id"] == "memory")
    anon = next(ln for ln in memory["lines"] if ln["name"] == "anonymous")["points"]
    spike = max(v for _, v in anon) >= (290 * MiB + SPIKE_BYTES) / MiB
    return len(html), len(anon), spike


def child(case: str, traced: bool) -> None:
    ticks, step_s = {**CASES, **SMOKE_CASES}[case]
    if traced:
        tracemalloc.start()
    cpu0, wall0 = time.process_time(), time.monotonic()
    html_bytes, points, spike = make_report(ticks, step_s)
    out = {
        "cpu_s": time.process_time() - cpu0,
        "wall_s": time.monotonic() - wall0,
        "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "html_kib": html_bytes / 1024,
        "memory_points": points,
        "spike_drawn": spike,
    }
    if traced:
        out["traced_peak_mib"] = tracemalloc.get_traced_memory()[1] / MiB
    print(json.dumps(out))


def run_case(case: str, traced: bool) -> dict[str, float]:
    argv = [sys.executable, __file__, "--child", case] + (["--traced"] if traced else [])
    done = subprocess.run(argv, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", choices=sorted({**CASES, **SMOKE_CASES}))
    ap.add_argument("--traced", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny sizes: that it runs")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.traced)
        return
    with smoke_cache(args.smoke):
        run_cases(SMOKE_CASES if args.smoke else CASES)


def run_cases(cases: dict[str, tuple[int, float]]) -> None:
    for ticks, step_s in cases.values():
        synthetic_store(ticks, step_s)  # made (or found) before anything is timed
    print(
        "case | CPU s | wall s | peak RSS MiB | traced peak MiB | HTML KiB"
        " | memory-plot points | spike drawn"
    )
    for case in cases:
        r = run_case(case, traced=False)
        t = run_case(case, traced=True)
        print(
            f"{case} | {r['cpu_s']:.2f} | {r['wall_s']:.2f} | {r['maxrss_mib']:.0f}"
            f" | {t['traced_peak_mib']:.0f} | {r['html_kib']:.0f} | {r['memory_points']}"
            f" | {r['spike_drawn']}"
        )


if __name__ == "__main__":
    main()
