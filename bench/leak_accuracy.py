"""How right the leak verdicts are on the labelled corpus (tests/fixtures/leaks).

    .venv/bin/python bench/leak_accuracy.py             # every fixture, a table per shape
    .venv/bin/python bench/leak_accuracy.py --detail    # and every labelled series

Every fixture is replayed through the run's real leak pass, pass by pass as a run sees
it (tests/support/leakcorpus.py: the samples written tick by tick to a SqliteStore,
`run_verdicts` with the fits kept across passes, default leaks config, the recording's
clock stretched by its time scale). Per labelled series:

- false alarms: passes after the judged start (the warm-up's end and `min_windows`
  windows) whose verdict is `growing` on a `healthy` series, counted per pass;
- a leak is detected at its first `growing` pass; the delay is from its onset, in
  replayed hours; `shortest` is what an ideal observer of the same window minima
  needs: the leak must have risen by the spread of the flat part's window minima
  before it (its noise) and two windows must have closed after the onset (a slope
  needs two points), whichever is later;
- slope error: the last pass's slope against the true rate;
- levelling and not-judged (`insufficient`) passes.

Besides the recorded fixtures, each leak fixture is scored once more with its warm-up
ending at the leak's onset (shape "linear from the warm-up's end"): a leak from the
start, as a per-query leak is, with nothing flat before it. No recording needed: the
same samples, a later judged start.

With --real-time, each half's goals (issue: 0 false alarms; a leak at 2x its threshold or
more, from the first query, `growing` within an hour of steady windows; a 1000x leak within
2 windows; a leak after a flat part within 2 windows of the ideal observer) are printed
met or missed, worst case named.

Exit 1 when any healthy series had a false alarm, any leak at or above its threshold was
never `growing`, or a goal was missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support

from tests.support.leakcorpus import (
    FIXTURES,
    REAL_TIME,
    Fixture,
    Score,
    fixtures,
    from_warmup_end,
    score,
)

from soak.analysis.leaks import window_minima
from soak.analysis.scenario_sections import LeaksConfig


def shortest_detection_h(fx: Fixture, s: Score, cfg: LeaksConfig) -> float | None:
    """Onset to the earliest point an ideal observer could call the leak (replayed hours)."""
    if s.label.kind != "leak" or s.label.rate_per_s <= 0:
        return None
    values = fx.series[s.resource]
    flat = [
        (i * fx.tick_s * fx.time_scale, float(v))
        for i, v in enumerate(values)
        if v is not None and fx.warmup_s <= i * fx.tick_s < s.label.onset_s
    ]
    minima = [m for _, m in window_minima([t for t, _ in flat], [v for _, v in flat], cfg.window_s)]
    noise = max(minima) - min(minima) if len(minima) >= 2 else 0.0
    rise_s = noise / s.label.rate_per_s * fx.time_scale  # replayed seconds
    return max(rise_s, 2 * cfg.window_s) / 3600.0


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def shape_table(rows: list[tuple[Fixture, Score]], cfg: LeaksConfig) -> None:
    """One row per label shape: false alarms, leaks found, onset to `growing` (replayed h)."""
    by_shape: dict[str, list[tuple[Fixture, Score]]] = defaultdict(list)
    for fx, s in rows:
        by_shape[f"{s.label.kind} {s.label.shape}"].append((fx, s))
    print(
        "shape | series | judged passes | false alarms (passes) | series with a false alarm"
        " | leaks >= threshold detected | median onset -> growing h | median shortest h"
        " | median slope error | levelling passes | not judged passes"
    )
    print("|---" * 11 + "|")
    for shape, group in sorted(by_shape.items()):
        scores = [s for _, s in group]
        must = [s for s in scores if s.must_detect]
        delays = [
            s.detection_delay_s * fx.time_scale / 3600
            for fx, s in group
            if s.detection_delay_s is not None
        ]
        shortest = [h for fx, s in group if s.detected and (h := shortest_detection_h(fx, s, cfg))]
        errors = [s.slope_error for s in scores if s.slope_error is not None]
        print(
            f"{shape} | {len(scores)} | {sum(s.judged_passes for s in scores)}"
            f" | {sum(s.false_alarms for s in scores)} | {sum(s.false_alarms > 0 for s in scores)}"
            f" | {sum(s.detected for s in must)}/{len(must)}"
            f" | {fmt(statistics.median(delays) if delays else None)}"
            f" | {fmt(statistics.median(shortest) if shortest else None)}"
            f" | {fmt(statistics.median(errors) if errors else None, '+.0%')}"
            f" | {sum(s.levelling_passes for s in scores)}"
            f" | {sum(s.insufficient_passes for s in scores)}"
        )


GOAL_H = 1.0  # a leak at 2x or more, from the first query: `growing` within this
GOAL_WINDOWS = 2  # a 1000x leak, and a leak after an onset (beyond the ideal): windows


def goal_misses(rows: list[tuple[Fixture, Score]], cfg: LeaksConfig) -> list[str]:
    """Each goal of the real-time corpus for one half: a line each, 'met' or the misses."""
    window_h = cfg.window_s / 3600.0
    misses: list[str] = []
    lines = []
    for name, bound_h, cases in _goal_cases(rows, cfg, window_h):
        late = [
            f"{fx.name} {s.resource} {fmt(h)} h"
            for fx, s, h, ideal_h in cases
            if h is None or h > bound_h + (ideal_h or 0.0)
        ]
        worst = max((h for _, _, h, _ in cases if h is not None), default=None)
        said = "met" if not late else f"MISSED: {', '.join(late)}"
        lines.append(
            f"- {name}: {len(cases) - len(late)} of {len(cases)}, worst {fmt(worst)} h: {said}"
        )
        misses += late
    alarms = [f"{fx.name} {s.resource}" for fx, s in rows if s.false_alarms]
    lines.insert(0, f"- 0 false alarms: {'met' if not alarms else 'MISSED: ' + ', '.join(alarms)}")
    print("\n".join(lines))
    return misses + alarms


def _goal_cases(
    rows: list[tuple[Fixture, Score]], cfg: LeaksConfig, window_h: float
) -> list[tuple[str, float, list[tuple[Fixture, Score, float | None, float | None]]]]:
    """(goal, bound h, [(fixture, score, judged start -> growing h, ideal h or None)])."""
    from_start, huge, onset = [], [], []
    for fx, s in rows:
        if s.label.kind != "leak" or s.true_per_hour < 2 * s.threshold_per_hour:
            continue
        judged_s = max(s.label.onset_s, fx.warmup_s)
        h = None if s.first_growing_s is None else (s.first_growing_s - judged_s) / 3600
        if s.label.onset_s > fx.warmup_s:
            onset.append((fx, s, h, shortest_detection_h(fx, s, cfg)))
        elif s.true_per_hour >= 999 * s.threshold_per_hour:
            huge.append((fx, s, h, None))
        else:
            from_start.append((fx, s, h, None))
    return [
        ("a leak at 2x or more from the first query, within 1 h", GOAL_H, from_start),
        ("a 1000x leak within 2 windows", GOAL_WINDOWS * window_h, huge),
        ("a leak after a flat part, within 2 windows of the ideal", GOAL_WINDOWS * window_h, onset),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--detail", action="store_true", help="a row per labelled series too")
    ap.add_argument("--dir", type=Path, default=None, help="the fixtures' folder")
    ap.add_argument(
        "--real-time",
        action="store_true",
        help="the real-time corpus (tests/fixtures/leaks/real-time), each half apart",
    )
    ap.add_argument(
        "--min-span-h", type=float, help="leaks.min_span_s, in replayed hours (default: none)"
    )
    ap.add_argument(
        "--declared-caps",
        action="store_true",
        help="judge with the leaks.caps a fixture declares (its cache's memory)",
    )
    ap.add_argument(
        "--startup-max-h",
        type=float,
        help="leaks.startup_max_s, in replayed hours (default: the config's)",
    )
    args = ap.parse_args()
    span = {"min_span_s": args.min_span_h * 3600} if args.min_span_h else {}
    if args.startup_max_h is not None:
        span["startup_max_s"] = args.startup_max_h * 3600
    cfg = LeaksConfig(**span)
    folder = args.dir or (REAL_TIME if args.real_time else FIXTURES)
    recorded = fixtures(folder)
    # The real-time corpus records its leaks from the first query: nothing to derive.
    derived = [d for fx in recorded if fx.half is None and (d := from_warmup_end(fx)) is not None]
    rows: list[tuple[Fixture, Score]] = [
        (fx, s) for fx in recorded + derived for s in score(fx, cfg, args.declared_caps)
    ]
    if not rows:
        print("leak_accuracy: no fixtures in tests/fixtures/leaks", file=sys.stderr)
        return 2
    halves = sorted({fx.half for fx, _ in rows if fx.half}) or [None]
    missed: list[str] = []
    for half in halves:
        if half is not None:
            print(f"\n## {half} half\n")
        shape_table([(fx, sc) for fx, sc in rows if fx.half == half], cfg)
        if half is not None:
            print(f"\ngoals, {half} half:")
            missed += goal_misses([(fx, sc) for fx, sc in rows if fx.half == half], cfg)
    if args.detail:
        print()
        print(
            "fixture | resource | label | true /h | threshold /h | final | final slope /h"
            " | first growing h | judged start -> growing h | ideal h | false alarms"
        )
        print("|---" * 11 + "|")
        for fx, s in rows:
            first = None if s.first_growing_s is None else s.first_growing_s * fx.time_scale / 3600
            name = f"{fx.name} ({fx.half})" if fx.half else fx.name
            # From the later of the warm-up's end and the leak's onset: what the verdicts saw.
            judged_h = max(s.label.onset_s, fx.warmup_s) * fx.time_scale / 3600
            ideal = shortest_detection_h(fx, s, cfg) if s.label.kind == "leak" else None
            print(
                f"{name} | {s.resource} | {s.label.kind} {s.label.shape} | {s.true_per_hour:.4g}"
                f" | {s.threshold_per_hour:.4g} | {s.final} | {s.final_slope_per_hour:.4g}"
                f" | {fmt(first)} | {fmt(None if first is None else first - judged_h)}"
                f" | {fmt(ideal)} | {s.false_alarms}"
            )
    failed = [s for _, s in rows if s.failed]
    for s in failed:
        why = f"{s.false_alarms} false alarm passes" if s.false_alarms else "leak never growing"
        print(f"FAILED {s.fixture} {s.resource}: {why}", file=sys.stderr)
    return 1 if failed or missed else 0


if __name__ == "__main__":
    sys.exit(main())
