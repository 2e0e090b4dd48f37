"""A `make demo` (or `make demo-leak`) run of testbed/refdns over time, as a table.

    SOAK_DEMO_DIR=/tmp/demo make demo
    .venv/bin/python bench/refdns_series.py /tmp/demo [--every 20]
    .venv/bin/python bench/refdns_series.py --smoke    # a 6-s demo soak of its own, then the table

One row every `--every` seconds from the run's start: the minimum and maximum in
that slice of heap in use, goroutines, anonymous and file-backed RSS, the query
log's rows, the drop counter, and the slowest GET /stats/top. The last run in the
data directory is shown.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from soak.clock import NS_PER_S, s_to_ns  # noqa: E402
from soak.sinks.sqlite import SqliteStore  # noqa: E402

COLUMNS = [
    ("heap MiB", "runtime", "heap_inuse_bytes", {}, 2**20),
    ("goroutines", "runtime", "goroutines", {}, 1),
    ("anon MiB", "process", "rss_anon_bytes", {}, 2**20),
    ("file MiB", "process", "rss_file_bytes", {}, 2**20),
    ("log rows", "files", "rows", {"path": "querylog.db"}, 1),
    ("dropped", "runtime", "querylog_dropped_total", {}, 1),
    ("top ms", "api", "latency_ms", {"endpoint": "GET /stats/top"}, 1),
]


def last_run(data: Path) -> str:
    with sqlite3.connect(data / "state.db") as db:
        row = db.execute("SELECT id FROM runs ORDER BY rowid DESC LIMIT 1").fetchone()
    if row is None:
        raise SystemExit(f"no run in {data}")
    return str(row[0])


def span(values: list[float], scale: float) -> str:
    if not values:
        return "-"
    lo, hi = min(values) / scale, max(values) / scale
    fmt = "{:,.0f}" if scale == 1 else "{:,.1f}"
    return fmt.format(lo) if round(lo, 1) == round(hi, 1) else f"{fmt.format(lo)}-{fmt.format(hi)}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", type=Path, nargs="?")
    ap.add_argument("--every", type=float, default=20.0)
    ap.add_argument("--smoke", action="store_true", help="a 6-s demo soak first: that it runs")
    args = ap.parse_args()
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="soak-bench-series-") as tmp:
            short_demo(Path(tmp))
            return table(Path(tmp), 2.0)
    if args.data is None:
        ap.error("the demo's data directory is required")
    return table(args.data, args.every)


def short_demo(data: Path) -> None:
    """`make demo`'s soak with 2-s and 4-s phases, in `data`."""
    soak = Path(sys.executable).parent / "soak"
    sets = ["phases.0.duration_s=2s", "phases.1.duration_s=4s"]
    argv = [str(soak), "start", str(ROOT / "scenarios" / "refdns-demo.yaml"), "--foreground"]
    argv += ["--json", "--data-dir", str(data), *(a for s in sets for a in ("--set", s))]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    if done.returncode not in (0, 1):  # 1: a criterion failed or was not judged; it ran
        raise SystemExit(f"the demo soak did not run (exit {done.returncode}): {done.stderr}")


def table(data: Path, every_s: float) -> int:
    run_id = last_run(data)
    store = SqliteStore(data / "points.db")
    try:
        series = {}
        for title, measurement, field, tags, _ in COLUMNS:
            found = store.series(run_id, measurement, field, tags or None)
            series[title] = [(t, float(v)) for t, v in found[0][1]] if found else []  # type: ignore[arg-type]
    finally:
        store.close()
    t0 = min(s[0][0] for s in series.values() if s)
    end = max(s[-1][0] for s in series.values() if s)
    step_ns = s_to_ns(every_s)
    print(f"run {run_id}")
    print("| s | " + " | ".join(c[0] for c in COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for start in range(t0, end + 1, step_ns):
        cells = [
            span([v for t, v in series[title] if start <= t < start + step_ns], scale)
            for title, _, _, _, scale in COLUMNS
        ]
        offset = (start - t0) // NS_PER_S
        print(f"| {offset}-{offset + int(every_s)} | " + " | ".join(cells) + " |")
    verdicts = json.loads((data / "runs" / run_id / "report.json").read_text())["verdicts"]
    print("verdicts: " + ", ".join(f"{v['resource']} {v['verdict']}" for v in verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
