"""Builtin load engine against dnsperf, and the builtin engine's pacing.

Starts unbound (one thread, local-data answers) on loopback. Part 1 runs,
alternately, dnsperf and `soak load --rate 0` at full speed with the same
query file, at least three times each, and prints the median q/s of each,
the ratio builtin/dnsperf and each one's CPU seconds per 1,000 answered
queries (cutime+cstime of this process's waited-for children, from
/proc/self/stat). Part 2 runs `soak load` at fixed rates and checks that the
achieved rate is within 0.5% of the target and that the generator's RSS does
not grow after the first seconds.

    .venv/bin/python bench/load_vs_dnsperf.py [--runs 3] [--duration 10] [--pacing-s 20]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.servers import unbound  # noqa: E402

QUERIES = [
    "www.example.test A",
    "mail.example.test A",
    "ns.example.test A",
    "blocked.example.test A",
    "www.example.test AAAA",
    "example.test MX",
]
TICKS_S = os.sysconf("SC_CLK_TCK")
SOAK = str(Path(sys.executable).parent / "soak")


def children_cpu_s() -> float:
    """CPU (user + system) of every child this process has waited for, from /proc."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state); cutime and cstime are fields 16 and 17.
    return (int(fields[13]) + int(fields[14])) / TICKS_S


def run_dnsperf(port: int, qfile: Path, duration_s: float) -> tuple[float, int, float]:
    cpu0 = children_cpu_s()
    argv = ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", str(qfile)]
    out = subprocess.run([*argv, "-l", str(duration_s)], capture_output=True, text=True).stdout
    cpu = children_cpu_s() - cpu0
    qps = float(re.search(r"Queries per second:\s+([0-9.]+)", out).group(1))  # type: ignore[union-attr]
    done = int(re.search(r"Queries completed:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    return qps, done, cpu


def run_builtin(
    port: int, qfile: Path, duration_s: float, rate: float = 0, extra: tuple[str, ...] = ()
) -> tuple[dict, float]:
    cpu0 = children_cpu_s()
    argv = [SOAK, "load", "--server", f"127.0.0.1:{port}", "--queries", str(qfile)]
    argv += ["--rate", str(rate), "--duration", str(duration_s), "--json", *extra]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return json.loads(out), children_cpu_s() - cpu0


def speed(port: int, qfile: Path, runs: int, duration_s: float) -> None:
    dp: list[tuple[float, int, float]] = []
    bi: list[tuple[float, int, float]] = []
    for i in range(runs):
        dp.append(run_dnsperf(port, qfile, duration_s))
        res, cpu = run_builtin(port, qfile, duration_s)
        bi.append((res["qps"], res["completed"], cpu))
        line = f"run {i + 1}: dnsperf {dp[-1][0]:,.0f} q/s, builtin {bi[-1][0]:,.0f} q/s"
        print(line, flush=True)
    med_dp = statistics.median(q for q, _, _ in dp)
    med_bi = statistics.median(q for q, _, _ in bi)
    cpu_dp = statistics.median(c / d * 1000 for _, d, c in dp)
    cpu_bi = statistics.median(c / d * 1000 for _, d, c in bi)
    print(f"median dnsperf {med_dp:,.0f} q/s, builtin {med_bi:,.0f} q/s")
    print(f"ratio builtin/dnsperf {med_bi / med_dp:.2f}")
    print(f"CPU s per 1,000 answered: dnsperf {cpu_dp:.4f}, builtin {cpu_bi:.4f}")


def proc_rss_kib(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    m = re.search(r"VmRSS:\s+(\d+)", text)
    return int(m.group(1)) if m else 0


def tree(pid: int) -> list[int]:
    out = [pid]
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return out
    for kid in kids:
        out += tree(int(kid))
    return out


def pacing(port: int, qfile: Path, duration_s: float, rates: list[float]) -> None:
    for rate in rates:
        argv = [SOAK, "load", "--server", f"127.0.0.1:{port}", "--queries", str(qfile)]
        argv += ["--rate", str(rate), "--duration", str(duration_s), "--json"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        rss: list[int] = []
        start = time.monotonic()
        while proc.poll() is None and time.monotonic() - start < duration_s + 30:
            rss.append(sum(proc_rss_kib(p) for p in tree(proc.pid)))
            time.sleep(1.0)
        out, _ = proc.communicate()
        res = json.loads(out)
        error = (res["achieved_rate"] - rate) / rate * 100
        early = rss[3] if len(rss) > 3 else 0
        late_rss = max(rss[3 : int(duration_s)] or [0])
        print(
            f"rate {rate:>8,.0f}: achieved {res['achieved_rate']:,.2f} q/s ({error:+.3f}%), "
            f"lost {res['lost']}, p99 {res['latency_ms']['p99']} ms, "
            f"generator_bound {res['generator_bound']}, RSS (all processes) at 3 s "
            f"{early / 1024:.1f} MiB, max after {late_rss / 1024:.1f} MiB",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--pacing-s", type=float, default=20.0)
    ap.add_argument("--rates", default="1000,10000,30000")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-pacing", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="soak-bench-") as tmp:
        qfile = Path(tmp) / "queries.txt"
        qfile.write_text("\n".join(QUERIES) + "\n")
        server_dir = Path(tmp) / "unbound"
        server_dir.mkdir()
        with unbound(server_dir, threads=1) as server:
            print(f"unbound (1 thread) on 127.0.0.1:{server.port}, {os.cpu_count()} CPUs")
            if not args.skip_speed:
                speed(server.port, qfile, args.runs, args.duration)
            if not args.skip_pacing:
                rates = [float(r) for r in args.rates.split(",")]
                pacing(server.port, qfile, args.pacing_s, rates)


if __name__ == "__main__":
    main()
