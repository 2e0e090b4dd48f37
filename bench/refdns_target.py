"""The reference Go server (testbed/refdns): its q/s per path, and its query log's
events/s before it sheds, against one unbound thread answering the same way.

    .venv/bin/python bench/refdns_target.py               # 10 s per query file
    .venv/bin/python bench/refdns_target.py --seconds 20
    .venv/bin/python bench/refdns_target.py --smoke       # 1 s each, two query-log steps

dnsperf (4 clients, 200 outstanding) at saturation on each path: `cached` (5
names, answered from the answer cache), `local` (the built-in zone), `blocked`
(the starter list), `miss` (a fresh name every query: every one forwarded to a
dnsmasq upstream). The peer is unbound with one thread answering local data (the
field notes: 85-95k q/s here), measured in the same run; the ratio is refdns's
q/s over unbound's. Then the query log: with its defaults (512-row transactions)
its writer alone, on a 5M-event queue filled at saturation and timed while it
drains (or: it kept up); and with one row a transaction and synchronous=FULL, the
offered rate raised step by step on the `local` path until the queue sheds
(refdns_querylog_dropped_total{stage="queue"}): rows written and dropped per second.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support

import httpx  # noqa: E402
from tests.support.refdns import refdns  # noqa: E402
from tests.support.servers import ServerProc, dnsmasq_upstream, unbound  # noqa: E402

from soak.samplers.promexpr import parse_expr, parse_samples  # noqa: E402

NAMES = {
    "cached": ["www.example.com", "mail.example.com", "cdn.example.net", "api.example.org"],
    "local": ["www.home.arpa", "nas.home.arpa", "printer.home.arpa", "router.home.arpa"],
    "blocked": ["blocked.example", "ads.example", "x.tracker.example", "y.blocked.example"],
}


def dnsperf(port: int, queries: Path, seconds: float, rate_qps: int | None = None) -> float:
    argv = ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", str(queries),
            "-l", str(seconds), "-c", "4", "-q", "200"]  # fmt: skip
    if rate_qps:
        argv += ["-Q", str(rate_qps)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    m = re.search(r"Queries per second:\s+([\d.]+)", out)
    if m is None:
        raise RuntimeError(f"dnsperf printed no rate: {out[-500:]}")
    return float(m.group(1))


def metric(server: ServerProc, expr: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{server.extra_ports['api']}/metrics", timeout=5).text
    value = parse_expr(expr).evaluate(parse_samples(text))
    return -1.0 if value is None else value


def query_file(tmp: Path, name: str, lines: list[str]) -> Path:
    path = tmp / f"{name}.txt"
    path.write_text("".join(f"{n} A\n" for n in lines))
    return path


def paths(
    srv: ServerProc, tmp: Path, seconds: float, misses: int
) -> dict[str, tuple[float, float]]:
    """path -> (q/s, CPU cores of refdns)."""
    files = {k: query_file(tmp, k, v) for k, v in NAMES.items()}
    files["miss"] = query_file(tmp, "miss", [f"m{i}.miss.example" for i in range(misses)])
    dnsperf(srv.port, files["cached"], 1.0)  # fills the cache
    out = {}
    for name, path in files.items():
        cpu0 = metric(srv, "process_cpu_seconds_total")
        qps = dnsperf(srv.port, path, seconds)
        cores = (metric(srv, "process_cpu_seconds_total") - cpu0) / seconds
        out[name] = (qps, cores)
    return out


DROPS = 'sum(refdns_querylog_dropped_total{stage="queue"})'
LOG_RATES = [2_000, 4_000, 6_000, 8_000, 12_000, 16_000, 0]  # q/s offered; 0: saturation


def query_log(
    srv: ServerProc, tmp: Path, seconds: float, rates: list[int]
) -> list[tuple[int, float, float, float]]:
    """Per offered rate (0: saturation): (offered, answered q/s, written/s, dropped/s)."""
    local = query_file(tmp, "local-log", NAMES["local"])
    steps = []
    for rate in rates:
        written0, dropped0 = metric(srv, "refdns_querylog_written_total"), metric(srv, DROPS)
        qps = dnsperf(srv.port, local, seconds, rate or None)
        written = (metric(srv, "refdns_querylog_written_total") - written0) / seconds
        dropped = (metric(srv, DROPS) - dropped0) / seconds
        steps.append((rate, qps, written, dropped))
        if rate and qps < 0.9 * rate:
            break  # the server (or dnsperf) is saturated: the last step is the ceiling
    return steps


def writer_drain(tmp: Path, seconds: float) -> tuple[float, float, float]:
    """The writer on its own: a queue long enough never to shed, filled at saturation,
    then timed while it drains with no load. (answered q/s, queue peak, rows/s)."""
    local = query_file(tmp, "local-drain", NAMES["local"])
    with refdns(tmp / "drain", "-querylog-queue=5000000", "-querylog-max-rows=9000000") as srv:
        qps = dnsperf(srv.port, local, seconds)
        peak = metric(srv, "refdns_querylog_queue_length")
        t0, w0 = time.monotonic(), metric(srv, "refdns_querylog_written_total")
        t1, w1 = t0, w0
        while metric(srv, "refdns_querylog_queue_length") > 0 and time.monotonic() < t0 + 120:
            time.sleep(0.2)
            t1, w1 = time.monotonic(), metric(srv, "refdns_querylog_written_total")
    return qps, peak, (w1 - w0) / (t1 - t0) if t1 > t0 else 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny sizes: that it runs")
    args = ap.parse_args()
    misses, log_rates = 600_000, LOG_RATES  # a fresh name per query for 10 s at saturation
    if args.smoke:
        args.seconds, misses, log_rates = 1.0, 100_000, [2_000, 0]
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "ub").mkdir()
        peer_file = query_file(tmp, "peer", ["www.example.test"])
        peers = []
        with unbound(tmp / "ub") as ub:
            peers.append(dnsperf(ub.port, peer_file, args.seconds))
        with (
            dnsmasq_upstream(tmp) as up,
            refdns(tmp / "data", "-querylog-max-rows=3000000", upstream_port=up.port) as srv,
        ):
            results = paths(srv, tmp, args.seconds, misses)
            rss_mib = metric(srv, "process_resident_memory_bytes") / 2**20
            goroutines = metric(srv, "go_goroutines")
        drain_qps, drain_peak, drain_rows_s = writer_drain(tmp, args.seconds)
        # A query log that commits every row and waits for the disk each time.
        with refdns(tmp / "fsync", "-querylog-batch=1", "-querylog-fsync") as srv:
            steps = query_log(srv, tmp, args.seconds, log_rates)
        # Again after: the machine is shared, so the peer brackets the run.
        with unbound(tmp / "ub") as ub:
            peers.append(dnsperf(ub.port, peer_file, args.seconds))
    peer = sum(peers) / len(peers)
    print(f"unbound, 1 thread, local data: {peers[0]:,.0f} then {peers[1]:,.0f} q/s (the peer)")
    print(f"{'path':<8} {'q/s':>9} {'refdns cores':>13} {'ratio to unbound':>17}")
    for name, (qps, cores) in results.items():
        print(f"{name:<8} {qps:>9,.0f} {cores:>13.2f} {qps / peer:>17.2f}")
    print("query log, one row a transaction, synchronous=FULL (local path):")
    print(f"{'offered':>10} {'answered q/s':>13} {'written/s':>10} {'dropped/s':>10}")
    for rate, qps, written, dropped in steps:
        offered = f"{rate:,}" if rate else "max"
        print(f"{offered:>10} {qps:>13,.0f} {written:>10,.0f} {dropped:>10,.0f}")
    if drain_peak > 0:
        print(f"writer alone: {drain_qps:,.0f} q/s answered left {drain_peak:,.0f} events "
              f"queued; drained at {drain_rows_s:,.0f} rows/s")  # fmt: skip
    else:
        print(f"writer alone: kept up with {drain_qps:,.0f} q/s (nothing left queued)")
    print(f"after the run: RSS {rss_mib:.0f} MiB, {goroutines:.0f} goroutines")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
