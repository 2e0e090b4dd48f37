"""A replay inside a soak run against the same replay alone, in the same run.

One unbound (one thread, local-data answers) on 127.0.0.1 and the capture of
bench/replay_vs_dnsperf.py (--clients UDP clients in turn through the benches' six
queries). Rounds alternate the two cases so that a busy moment hits both:

- alone (the peer): `soak load --replay` at --rate q/s for --duration s;
- in a soak: `soak start --foreground` with `load.replay` at the same rate, 1-s ticks
  (`samplers.interval_s=1`, every sampler of the default scenario on), for the same
  seconds: its windows' send offset p99 (each stored `load` point of class `all`), the
  share of windows within --bound-us, and the `generator` criterion's verdict; with
  `--scheduling both`, once with the replay's process in the real-time class
  (`load.replay.scheduling: realtime`, the default) and once without (`normal`).

Printed: per round and as medians, the offset p99 of the whole replay alone and the
worst and median window p99 in the soak, and their ratio (in a soak / alone). Beside
each soak, the machine's steal time (/proc/stat: the hypervisor ran something else
while this virtual machine's CPUs had work): in each window, and in the late ones, for
a late window that no process inside the machine could have kept on time.

    PYTHONPATH=src .venv/bin/python bench/replay_in_soak.py [--runs 3] [--duration 60]
        [--rate 10000] [--clients 100] [--bound-us 2000] [--src DIR]
        [--scheduling realtime|normal|both]
    PYTHONPATH=src .venv/bin/python bench/replay_in_soak.py --smoke   # seconds

`--src DIR`: the soak that runs (its `src`), e.g. an older checkout's, for a before
and after on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.replay_vs_dnsperf import make_capture  # noqa: E402
from tests.support.servers import external_unbound, unbound  # noqa: E402
from tests.support.soaks import soak_argv  # noqa: E402

from soak.sinks.sqlite import SqliteStore  # noqa: E402

SCHEDULINGS = {"realtime": ["realtime"], "normal": ["normal"], "both": ["realtime", "normal"]}


def env_for(src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src)}


def alone(src: Path, port: int, cap: Path, duration_s: float, rate: float) -> dict[str, Any]:
    argv = soak_argv("load", "--server", f"127.0.0.1:{port}", "--replay", str(cap))
    argv += ["--rate", str(rate), "--duration", str(duration_s), "--json", "--timeout", "1"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env_for(src), check=True)
    d = json.loads(done.stdout)
    return {"p99_us": d["send_offset_us"]["p99"], "sent": d["sent"], "skipped": d["skipped"]}


STEAL_SAMPLE_S = 0.05
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


class Steal:
    """The machine's steal time (every CPU's, /proc/stat) sampled in a thread."""

    def __init__(self) -> None:
        self.samples: list[tuple[int, int]] = []  # (wall ns, steal ticks so far)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Steal:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            with open("/proc/stat") as f:
                steal = int(f.readline().split()[8])
            self.samples.append((time.time_ns(), steal))
            self._stop.wait(STEAL_SAMPLE_S)

    def ms_in(self, start_ns: int, end_ns: int) -> float:
        """Steal time between two wall-clock instants (the samples nearest them)."""

        def at(t_ns: int) -> int:
            return min(self.samples, key=lambda s: abs(s[0] - t_ns))[1]

        return (at(end_ns) - at(start_ns)) * TICK_MS


def in_soak(
    src: Path,
    folder: Path,
    port: int,
    cap: Path,
    duration_s: float,
    rate: float,
    bound_us: float,
    scheduling: str,
) -> dict[str, Any]:
    replay = {"file": str(cap), "rate_qps": rate, "scheduling": scheduling}
    scenario = {
        "name": "replay-in-soak",
        "target": external_unbound(port),
        "phases": [{"name": "steady", "duration_s": f"{duration_s:g}s"}],
        "load": {"timeout_s": "1s", "replay": replay},
        "criteria": {"leaks_ok": False},
    }
    path = folder / "replay-in-soak.yaml"
    path.write_text(json.dumps(scenario))
    data = folder / f"data-{os.urandom(4).hex()}"
    argv = soak_argv("start", str(path), "--foreground", "--json", "--data-dir", str(data))
    argv += ["--set", "samplers.interval_s=1"]
    with Steal() as steal:
        done = subprocess.run(argv, capture_output=True, text=True, env=env_for(src))
    if done.returncode not in (0, 1):
        raise SystemExit(f"soak start exited {done.returncode}: {done.stderr[-2000:]}")
    status = json.loads(done.stdout[done.stdout.index("{") :])
    store = SqliteStore(data / "points.db")
    try:
        found = store.series(status["id"], "load", "send_offset_p99_us", {"class": "all"})
        points = [(t, float(v)) for _, values in found for t, v in values]
    finally:
        store.close()
    report = json.loads(Path(status["reports"]["json"]).read_text())
    generator = [c for c in report["criteria"] if c["name"] == "generator"]
    p99s = [p for _, p in points]
    # each window's point is stamped at the end of its second of the run
    steal_ms = [steal.ms_in(t - 1_000_000_000, t) for t, _ in points]
    late = [i for i, p in enumerate(p99s) if p > bound_us]
    within = len(p99s) - len(late)
    return {
        "windows": len(p99s),
        "within": within,
        "share_within": within / len(p99s) if p99s else 0.0,
        "worst_p99_us": max(p99s, default=0.0),
        "median_p99_us": statistics.median(p99s) if p99s else 0.0,
        "generator": verdict(generator[0]) if generator else "absent",
        "sent": status["load_totals"]["sent"],
        "skipped": status["load_totals"]["skipped"],
        "late_windows": late,  # which, from 0
        "late_windows_steal_ms": [steal_ms[i] for i in late],
        "windows_with_steal": sum(1 for ms in steal_ms if ms > 0),
        "steal_ms_in_run": sum(steal_ms),
    }


def verdict(criterion: dict[str, Any]) -> str:
    if not criterion["judged"]:
        return "not judged"
    return "pass" if criterion["ok"] else "fail"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=10_000.0)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--bound-us", type=float, default=2_000.0)
    ap.add_argument("--src", type=Path, default=ROOT / "src")
    ap.add_argument(
        "--scheduling",
        choices=sorted(SCHEDULINGS),
        default="realtime",
        help="the replay process's load.replay.scheduling; both: each round both ways",
    )
    ap.add_argument("--smoke", action="store_true", help="one short round at 1,000 q/s")
    args = ap.parse_args()
    if args.smoke:
        args.runs, args.duration, args.rate = 1, 6.0, 1_000.0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cap, _ = make_capture(folder, args.clients, 10.0)
        with unbound(folder, local_data=None) as server:
            rows: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
            for r in range(args.runs):
                a = alone(args.src, server.port, cap, args.duration, args.rate)
                print(f"round {r + 1}: alone {json.dumps(a)}")
                for sched in SCHEDULINGS[args.scheduling]:
                    s = in_soak(
                        args.src, folder, server.port, cap, args.duration, args.rate,
                        args.bound_us, sched,
                    )  # fmt: skip
                    rows.setdefault(sched, []).append((a, s))
                    print(f"round {r + 1}: in a soak, {sched} {json.dumps(s)}")
    for sched, got in rows.items():
        alone_p99 = statistics.median(a["p99_us"] for a, _ in got)
        worst = statistics.median(s["worst_p99_us"] for _, s in got)
        share = statistics.median(s["share_within"] for _, s in got)
        late = sum(len(s["late_windows"]) for _, s in got)
        # a late window in which the hypervisor stole no time is one this code could have kept
        late_unstolen = sum(ms == 0 for _, s in got for ms in s["late_windows_steal_ms"])
        print(
            f"{sched}, medians of {len(got)}: alone p99 {alone_p99:,.0f} µs; in a soak, windows"
            f" within {args.bound_us:,.0f} µs {share:.1%}, worst window p99 {worst:,.0f} µs;"
            f" worst in a soak / alone {worst / max(alone_p99, 1):.2f}"
            f" (generator: {', '.join(s['generator'] for _, s in got)}); late windows"
            f" {late}, of which without steal time {late_unstolen}"
        )


if __name__ == "__main__":
    main()
