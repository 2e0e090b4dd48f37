"""Builtin load engine against dnsperf, and the builtin engine's pacing.

Part 1, per server (unbound with one thread and local-data answers,
pdns-recursor with one thread answering from its packet cache, knot-resolver
from its cache; the two resolvers forward to a dnsmasq upstream) and per
protocol (UDP; TCP, DoT and DoH with one connection for both engines; DoT
and DoH against unbound and knot-resolver, which listen for them): runs, alternately,
dnsperf and `soak load --rate max` at full speed with the same query file, at
least five times each, and prints the median q/s of each, the ratio
builtin/dnsperf, each one's CPU ms per 1,000 answered queries (cutime+cstime
of this process's waited-for children, from /proc/self/stat) and their ratio,
with the load average before and after. Goals (UDP): q/s ratio >= 1.1, CPU
ratio <= 0.8. Part 2 runs `soak load` at fixed rates against unbound and checks
that the achieved rate is within 0.5% of the target and that the generator's
RSS does not grow after the first seconds.

    .venv/bin/python bench/load_vs_dnsperf.py [--runs 5] [--duration 10] [--pacing-s 20]
        [--servers unbound,pdns-recursor,knot-resolver] [--protocols udp,tcp,dot,doh]
    .venv/bin/python bench/load_vs_dnsperf.py --smoke   # seconds: that it still runs

SOAK_LOAD_PURE=1 in the environment measures the pure-Python loops instead of the
compiled ones (UDP's, and TCP's and DoT's; DoH has the Python loop either way).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.pdns import pdns_recursor  # noqa: E402
from tests.support.servers import ServerProc, dnsmasq_upstream, kresd, unbound, write_queries  # noqa: E402
from tests.support.tls import make_cert  # noqa: E402

TICKS_S = os.sysconf("SC_CLK_TCK")
SOAK = str(Path(sys.executable).parent / "soak")


def children_cpu_s() -> float:
    """CPU (user + system) of every child this process has waited for, from /proc."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state); cutime and cstime are fields 16 and 17.
    return (int(fields[13]) + int(fields[14])) / TICKS_S


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run_dnsperf(
    port: int, qfile: Path, duration_s: float, protocol: str = "udp"
) -> tuple[float, int, float]:
    cpu0 = children_cpu_s()
    argv = ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", str(qfile), "-m", protocol]
    if protocol == "doh":
        argv += ["-O", f"doh-uri=https://127.0.0.1:{port}/dns-query", "-O", "doh-method=POST"]
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
    rate_arg = str(rate) if rate > 0 else "max"
    argv += ["--rate", rate_arg, "--duration", str(duration_s), "--json", *extra]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return json.loads(out), children_cpu_s() - cpu0


def speed(port: int, qfile: Path, runs: int, duration_s: float, protocol: str = "udp") -> None:
    dp: list[tuple[float, int, float]] = []
    bi: list[tuple[float, int, float]] = []
    # One connection for both over TCP, DoT and DoH (dnsperf's default is one client).
    extra = ("--protocol", protocol, "--flows", "1") if protocol != "udp" else ()
    print(f"load average before: {load_average()}", flush=True)
    for i in range(runs):
        dp.append(run_dnsperf(port, qfile, duration_s, protocol))
        res, cpu = run_builtin(port, qfile, duration_s, extra=extra)
        bi.append((res["qps"], res["completed"], cpu))
        line = f"run {i + 1}: dnsperf {dp[-1][0]:,.0f} q/s, builtin {bi[-1][0]:,.0f} q/s"
        print(line, flush=True)
    med_dp = statistics.median(q for q, _, _ in dp)
    med_bi = statistics.median(q for q, _, _ in bi)
    cpu_dp = statistics.median(c / d * 1000 for _, d, c in dp)
    cpu_bi = statistics.median(c / d * 1000 for _, d, c in bi)
    print(f"load average after: {load_average()}")
    print(f"median dnsperf {med_dp:,.0f} q/s, builtin {med_bi:,.0f} q/s")
    print(f"ratio builtin/dnsperf q/s {med_bi / med_dp:.2f} (goal >= 1.1)")
    print(f"CPU ms per 1,000 answered: dnsperf {cpu_dp * 1000:.2f}, builtin {cpu_bi * 1000:.2f}")
    print(f"ratio builtin/dnsperf CPU per query {cpu_bi / cpu_dp:.2f} (goal <= 0.8)", flush=True)


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


@contextlib.contextmanager
def start_server(name: str, tmp: Path) -> Iterator[ServerProc]:
    server_dir = tmp / name
    server_dir.mkdir()
    cert = make_cert(server_dir)
    if name.startswith("unbound"):
        with unbound(server_dir, threads=1, tls=cert) as server:
            yield server
        return
    (server_dir / "upstream").mkdir()
    (server_dir / "resolver").mkdir()
    with dnsmasq_upstream(server_dir / "upstream") as upstream:
        if name == "pdns-recursor":
            with pdns_recursor(server_dir / "resolver", upstream.port) as server:
                yield server
        elif name == "knot-resolver":
            with kresd(server_dir / "resolver", upstream.port, tls=cert) as server:
                yield server
        else:
            raise SystemExit(f"unknown server {name!r}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--servers", default="unbound,pdns-recursor,knot-resolver")
    ap.add_argument("--protocols", default="udp,tcp")
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--pacing-s", type=float, default=20.0)
    ap.add_argument("--rates", default="1000,10000,30000")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-pacing", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny sizes: that it runs")
    args = ap.parse_args()
    if args.smoke:  # one run of each part on unbound; 5 s of pacing: its RSS reading at 3 s
        args.runs, args.duration, args.servers, args.protocols = 1, 1.0, "unbound", "udp"
        args.pacing_s, args.rates = 5.0, "1000"
    with tempfile.TemporaryDirectory(prefix="soak-bench-") as tmp:
        qfile = write_queries(Path(tmp))
        pure = os.environ.get("SOAK_LOAD_PURE") == "1"
        loops = "Python" if pure else "compiled"
        print(f"{os.cpu_count()} CPUs, builtin UDP, TCP, DoT and DoH loops: {loops}")
        for name in args.servers.split(",") if not args.skip_speed else []:
            with start_server(name, Path(tmp)) as server:
                for protocol in args.protocols.split(","):
                    # DoT and DoH: the server's TLS listeners (extra ports), same thread.
                    port = server.port_for(protocol)
                    print(f"== {name} (1 thread) on 127.0.0.1:{port}, {protocol}")
                    speed(port, qfile, args.runs, args.duration, protocol)
        if not args.skip_pacing:
            with start_server("unbound-pacing", Path(tmp)) as server:
                rates = [float(r) for r in args.rates.split(",")]
                pacing(server.port, qfile, args.pacing_s, rates)


if __name__ == "__main__":
    main()
