"""The load engine's per-window latency work, before and after the ledger's histograms.

The parent process folds each closed window's latencies (whole µs -> count, as the
loops hand them over) into the run's histograms: before, hdrh's HdrHistogram at three
significant digits, per class and `all`, for the window and for the run; after,
soak.histogram.LatencyHistogram the same way, plus each window's text form per class
(the `lat_hist` field stored). Measured in CPU seconds of this process per answer, over
`--seconds` windows of `--rate` answers with latencies spread like a busy machine's
(log-normal around 300 µs, quantised as the compiled loop quantises them).

    .venv/bin/python bench/window_fold_cost.py [--rate 100000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from hdrh.histogram import HdrHistogram

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from soak.histogram import LatencyHistogram  # noqa: E402

HIGHEST_US = 2_001_000


def quantised(us: int) -> int:
    """The compiled loop's buckets: exact below 2048 µs, then 1024 per power of two."""
    shift = max(us.bit_length(), 11) - 11
    return (us >> shift) << shift


def windows(rate: int, seconds: int, classes: int) -> list[list[dict[int, int]]]:
    rng = random.Random(1)
    out = []
    for _ in range(seconds):
        per_class: list[dict[int, int]] = [{} for _ in range(classes)]
        for i in range(rate):
            us = quantised(int(rng.lognormvariate(5.7, 0.8)) + 1)
            d = per_class[i % classes]
            d[us] = d.get(us, 0) + 1
        out.append(per_class)
    return out


def before(ws: list[list[dict[int, int]]]) -> None:
    run = [HdrHistogram(1, HIGHEST_US, 3) for _ in range(len(ws[0]) + 1)]
    window = [HdrHistogram(1, HIGHEST_US, 3) for _ in range(len(ws[0]) + 1)]
    for w in ws:
        for h in window:
            h.reset()
        for c, lat in enumerate(w):
            for hists in (run, window):
                for h in (hists[c], hists[-1]):
                    for us, n in lat.items():
                        h.record_value(min(us, HIGHEST_US), n)
        for h in window:  # the window's lat_p50_ms ... lat_p999_ms fields
            for pct in (50.0, 95.0, 99.0, 99.9):
                h.get_value_at_percentile(pct)


def after(ws: list[list[dict[int, int]]]) -> None:
    run = [LatencyHistogram() for _ in range(len(ws[0]) + 1)]
    window = [LatencyHistogram() for _ in range(len(ws[0]) + 1)]
    for w in ws:
        for h in window:
            h.clear()
        for c, lat in enumerate(w):
            for hists in (run, window):
                for h in (hists[c], hists[-1]):
                    for us, n in lat.items():
                        h.record(min(us, HIGHEST_US), n)
        for h in window:  # the window's lat_*_ms fields and its lat_hist
            h.latency_ms()
            h.encode()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=100_000)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="one round of 2 s at 2,000 q/s")
    args = ap.parse_args()
    if args.smoke:
        args.rate, args.seconds, args.rounds = 2_000, 2, 1
    ws = windows(args.rate, args.seconds, classes=2)
    answers = args.rate * args.seconds
    for _ in range(args.rounds):
        for name, fold in (("before (hdrh)", before), ("after (lat_hist)", after)):
            t0 = time.process_time()
            fold(ws)
            cpu_s = time.process_time() - t0
            print(f"{name}: {cpu_s * 1e9 / answers:.1f} ns CPU per answer ({cpu_s:.2f} s)")


if __name__ == "__main__":
    main()
