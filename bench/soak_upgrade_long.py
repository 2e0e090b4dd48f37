"""One soak across an upgrade at real length: scenarios/refdns-soak-upgrade.yaml with an
hour on each version.

    python bench/soak_upgrade_long.py --out /work/runs/upgrade-long/RUN   # 2 h, swap at 1 h
    python bench/soak_upgrade_long.py --smoke                             # ~60 s

refdns writes data format 1 under load (the scenario's 500 q/s, the embedded SQLite
store), is swapped in place for the current release on the same data directory at the
end of the `old` phase (10 min of warm-up and 50 min of soak: an hour), and soaks on for
`--new-min` minutes. The scenario's leak windows (10 min) stay as they are, so each
version has at least five of them. The code and the refdns binary are copied into the
output directory first, so that edits to the tree during the run do not mix versions.

At the end it prints each segment's due/sent/lost and p50/p99, its leak verdicts, the
swap's gap and lost queries, the swap's checks, and `soak audit`'s result.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = Path("scenarios") / "refdns-soak-upgrade.yaml"
# The smoke run: 1-s ticks and 5-s leak windows, which half a minute cannot judge (an
# exploratory run); the swap's half second of lost queries is a few % of it.
SMOKE_SETS = [
    "samplers.interval_s=1",
    "leaks.window_s=5s",
    "leaks.interval_s=5s",
    "leaks.min_windows=3",
    "criteria.not_judged=pass",
    "criteria.lost_ratio_max=0.05",
]


def frozen_copy(out: Path) -> Path:
    """src/, scenarios/ and the refdns binary copied under out/code (the scenario names
    the binary as ../build/refdns/refdns): the run's code stays as it was at its start."""
    code = out / "code"
    binary = ROOT / "build" / "refdns" / "refdns"
    if not binary.exists():
        sys.exit(f"{binary} is missing: run `bash scripts/build-refdns.sh` first")
    ignore = shutil.ignore_patterns("__pycache__", "*.so.tmp")
    shutil.copytree(ROOT / "src", code / "src", ignore=ignore)
    shutil.copytree(ROOT / "scenarios", code / "scenarios", ignore=ignore)
    (code / "build" / "refdns").mkdir(parents=True)
    shutil.copy2(binary, code / "build" / "refdns" / "refdns")
    return code


def soak_argv(code: Path, data: Path, args: argparse.Namespace) -> list[str]:
    """`soak start` in the foreground with the phases set to the run's length."""
    warmup_min = 10.0 if not args.smoke else 10 / 60
    old_min = args.old_min - warmup_min if not args.smoke else 20 / 60
    new_min = args.new_min if not args.smoke else 30 / 60
    sets = [
        f"phases.0.duration_s={warmup_min * 60:.0f}s",
        f"phases.1.duration_s={old_min * 60:.0f}s",
        f"phases.2.duration_s={new_min * 60:.0f}s",
        f"load.rate_qps={args.rate_qps}",
        *(SMOKE_SETS if args.smoke else []),
        *(leak_window_sets(args.leak_window_min) if args.leak_window_min else []),
    ]
    argv = [sys.executable, "-m", "soak.cli", "start", str(code / SCENARIO), "--foreground"]
    argv += ["--json", "--data-dir", str(data)]
    for item in sets:
        argv += ["--set", item]
    return argv


def leak_window_sets(minutes: float) -> list[str]:
    """Leak windows (and passes) of `minutes`: a shorter run's segments still get the
    windows a verdict needs (leaks.min_windows)."""
    return [f"leaks.window_s={minutes * 60:.0f}s", f"leaks.interval_s={minutes * 60:.0f}s"]


def env_for(code: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(code / "src")}


def figures(data: Path, status: dict[str, Any]) -> list[str]:
    """The lines to print: segments, leak verdicts, the swap, its checks."""
    run_dir = data / "runs" / status["id"]
    report = json.loads((run_dir / "report.json").read_text())
    result = json.loads((run_dir / "result.json").read_text())
    lines = [f"run {status['id']}: {status['status']}: {status.get('message', '')}"]
    totals = result.get("load_totals", {})
    lines.append(
        f"run load: due {totals.get('due')}, sent {totals.get('sent')}, lost {totals.get('lost')}"
    )
    for seg in report.get("segments", []):
        load = seg["load"]
        lines.append(
            f"segment {seg['version']} [{seg['start_s']:.0f} s, {seg['end_s']:.0f} s]: "
            f"due {load.get('due')}, sent {load.get('sent')}, lost {load.get('lost')}, "
            f"p50 {load.get('p50_ms')} ms, p99 {load.get('p99_ms')} ms"
        )
        for v in seg["leaks"]:
            lines.append(
                f"  leak {v['resource']}: {v['verdict']} "
                f"(slope {v.get('slope_per_hour')}/h, windows {v.get('windows')})"
            )
        swap = seg.get("swap")
        if swap:
            lines.append(
                f"  swap at {swap['at_s']:.1f} s: ready {swap['ready_s']} s after the stop, "
                f"{swap['seconds']} s of gap, sent {swap['sent']}, lost {swap['lost']} "
                f"(refused {swap['refused']}), {swap['status']}"
            )
        for case in seg["cases"]:
            lines.append(f"  check {case['status']}: {case['name']}")
    return lines


def audit_line(code: Path, data: Path, run_id: str) -> str:
    argv = [sys.executable, "-m", "soak.cli", "audit", run_id, "--data-dir", str(data)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env_for(code), check=False)
    last = (done.stdout.strip().splitlines() or [done.stderr.strip()])[-1]
    return f"audit (exit {done.returncode}): {last}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="a new directory for the run (default: temp)")
    parser.add_argument("--old-min", type=float, default=60.0, help="minutes to the swap")
    parser.add_argument("--new-min", type=float, default=60.0, help="minutes after the swap")
    parser.add_argument("--rate-qps", type=int, default=500)
    parser.add_argument(
        "--leak-window-min", type=float, default=0.0, help="leak windows (default: 10 min)"
    )
    parser.add_argument("--smoke", action="store_true", help="~60 s: that it still runs")
    args = parser.parse_args()
    out = args.out or Path(os.environ.get("TMPDIR", "/tmp")) / f"soak-upgrade-{os.getpid()}"
    out.mkdir(parents=True, exist_ok=False)
    code = frozen_copy(out)
    data = out / "data"
    argv = soak_argv(code, data, args)
    print("command:", " ".join(argv), flush=True)
    began = time.monotonic()
    with (out / "soak.stderr").open("w") as err:
        done = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=err, text=True, env=env_for(code), cwd=code
        )
    (out / "soak.stdout").write_text(done.stdout)
    print(f"soak start exited {done.returncode} after {time.monotonic() - began:.0f} s")
    try:
        status = json.loads(done.stdout[done.stdout.index("{") :])
    except ValueError:
        print(f"no status printed; see {out / 'soak.stderr'}")
        return 1
    for line in figures(data, status):
        print(line)
    print(audit_line(code, data, status["id"]))
    if args.smoke and not args.out:
        shutil.rmtree(out, ignore_errors=True)
    return 0 if done.returncode in (0, 1) else done.returncode


if __name__ == "__main__":
    sys.exit(main())
