"""False positives of `soak compare`: A/A pairs of the same bench on one server.

    .venv/bin/python bench/compare_aa.py [--pairs 20] [--keep DIR]
    .venv/bin/python bench/compare_aa.py --smoke    # one short pair: that it still runs

unbound 1.17 (one thread, `local-data` answers) on 127.0.0.1, started by each bench.
Each pair is two `soak bench` runs of the same scenario in turns (A, then B): one
class, 3 saturation runs of 1 s after a 0.5-s throwaway, no knee search, 300 q/s
fixed for 2 s three times; then `soak compare A B --json`. A and B are the same
thing, so every figure called `worse` or `better` is a false positive. Prints each
pair's verdicts, then the counts; the bench results stay in --keep DIR if given,
and `--rejudge DIR` compares the pairs kept there again without measuring (to judge
old stored pairs with changed comparison code).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.servers import bench_load, unbound_process_target  # noqa: E402

SOAK = str(Path(sys.executable).parent / "soak")
BENCH_ARGS = [
    "--runs", "3", "--duration", "1", "--throwaway", "0.5", "--no-knee",
    "--rates", "300", "--fixed-duration", "2", "--fixed-runs", "3", "--classes", "local",
]  # fmt: skip
# --smoke: the same pair, each bench as short as it may be.
SMOKE_BENCH_ARGS = [
    "--runs", "1", "--duration", "0.5", "--throwaway", "0", "--no-knee",
    "--rates", "300", "--fixed-duration", "0.5", "--fixed-runs", "2", "--classes", "local",
]  # fmt: skip


def scenario(tmp: Path) -> Path:
    doc = {
        "name": "aa-unbound",
        "target": unbound_process_target(1),
        "load": bench_load(1),
        "phases": [{"name": "p", "duration_s": 10}],
        "bench": {"warm_rate_qps": 500},
    }
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def bench(path: Path, out: Path, data: Path, bench_args: list[str]) -> None:
    done = subprocess.run(
        [SOAK, "bench", str(path), *bench_args, "--out", str(out), "--data-dir", str(data)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode not in (0, 1):
        raise SystemExit(f"soak bench failed: {done.stderr[-2000:]}")


def compare(a: Path, b: Path, data: Path) -> dict[str, object]:
    done = subprocess.run(
        [SOAK, "compare", str(a), str(b), "--json", "--data-dir", str(data)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if done.returncode not in (0, 1):
        raise SystemExit(f"soak compare failed: {done.stderr[-2000:]}")
    result: dict[str, object] = json.loads(done.stdout[done.stdout.index("{") :])
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--keep", type=Path, default=None)
    ap.add_argument("--rejudge", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny sizes: that it runs")
    args = ap.parse_args()
    bench_args = SMOKE_BENCH_ARGS if args.smoke else BENCH_ARGS
    if args.smoke:
        args.pairs = 1
    work = args.rejudge or args.keep or Path(tempfile.mkdtemp(prefix="soak-aa-"))
    work.mkdir(parents=True, exist_ok=True)
    data = work / "data"
    path = scenario(work)
    totals: Counter[str] = Counter()
    pairs_flagged = 0
    for i in range(args.pairs):
        a, b = work / f"pair{i:02d}" / "A", work / f"pair{i:02d}" / "B"
        if args.rejudge is None:
            bench(path, a, data, bench_args)
            bench(path, b, data, bench_args)
        cmp = compare(a, b, data)
        figures = cmp["figures"]
        assert isinstance(figures, list)
        verdicts = Counter(str(f["verdict"]) for f in figures)
        totals.update(verdicts)
        flagged = [
            f"{f['name']} {f['verdict']}" for f in figures if f["verdict"] in ("worse", "better")
        ]
        pairs_flagged += bool(flagged)
        print(f"pair {i + 1:2d}: " + ", ".join(f"{k} {n}" for k, n in sorted(verdicts.items()))
              + (f"  <- {'; '.join(flagged)}" if flagged else ""), flush=True)  # fmt: skip
    print(f"\npairs with a figure called worse or better: {pairs_flagged} of {args.pairs}")
    print("figures: " + ", ".join(f"{k} {n}" for k, n in sorted(totals.items())))
    if args.smoke and not args.keep:
        shutil.rmtree(work)
    else:
        print(f"results in {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
