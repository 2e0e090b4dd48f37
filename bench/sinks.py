"""Sinks and samplers: points per second into each sink, one full tick, memory over many ticks.

    .venv/bin/python bench/sinks.py                       # all three parts
    .venv/bin/python bench/sinks.py --part sinks --points 200000
    .venv/bin/python bench/sinks.py --part memory --ticks 1800 --interval-s 1
    .venv/bin/python bench/sinks.py --smoke               # seconds: that it still runs

Every server is real and on loopback (VictoriaMetrics, InfluxDB 1.6,
pdns-server), started in a temp dir. The peer for the points/s figure is
influxdb-client's own Point objects through its synchronous WriteApi, which
is what a hand-written sampler would use.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support

import httpx  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402
from tests.support.pdns import PDNS_API_KEY, pdns_server  # noqa: E402
from tests.support.servers import ServerProc  # noqa: E402
from tests.support.tsdb import influxdb_v1, victoria_metrics  # noqa: E402

from soak.clock import NS_PER_S, TickGrid  # noqa: E402
from soak.names import SERIES  # noqa: E402
from soak.points import Point  # noqa: E402
from soak.samplers import TickRunner, build_samplers  # noqa: E402
from soak.samplers.selection import SamplersConfig  # noqa: E402
from soak.sinks import SinkSet, build_sinks  # noqa: E402
from soak.sinks.destinations import (  # noqa: E402
    InfluxV1SinkConfig,
    InfluxV2SinkConfig,
    SinkConfig,
    SpoolConfig,
    SqliteSinkConfig,
)
from soak.sinks.metrics import ServiceMetrics  # noqa: E402
from soak.targets.base import Running  # noqa: E402

S = NS_PER_S
RUN = {"soak": "bench", "scenario": "bench", "target": "pdns", "version": "4.7.3"}
PROCESS_FIELDS = SERIES["process"].fields


def synthetic_points(n: int, t0_ns: int) -> list[Point]:
    """A tick's mix, repeated: process (15 fields), api (4), dig (3), load per class (8)."""
    points: list[Point] = []
    i = 0
    while len(points) < n:
        t = t0_ns + i * S
        points.append(
            Point("process", {f: float(i + k) for k, f in enumerate(PROCESS_FIELDS)}, t, RUN)
        )
        for ep in ("GET /stats/summary", "GET /queries", "GET /stats/top"):
            points.append(
                Point(
                    "api",
                    {"latency_ms": 1.5, "status": 200.0, "bytes": 512.0, "ok": 1.0},
                    t,
                    {**RUN, "endpoint": ep},
                )
            )
        points.append(
            Point(
                "dig",
                {"latency_ms": 0.4, "rcode": 0.0, "ok": 1.0},
                t,
                {**RUN, "probe": "www.example.test/A"},
            )
        )
        for cls in ("all", "cached", "miss"):
            fields = {
                "sent": 2000.0,
                "completed": 1999.0,
                "lost": 1.0,
                "late": 0.0,
                "rate_target": 2000.0,
                "rate_achieved": 1999.0,
                "lat_p50_ms": 0.1,
                "lat_p99_ms": 0.9,
            }
            points.append(Point("load", fields, t, {**RUN, "class": cls}))
        i += 1
    return points[:n]


def points_per_s(sinks: SinkSet, points: list[Point], chunk: int) -> float:
    start = time.perf_counter()
    for i in range(0, len(points), chunk):
        sinks.write(points[i : i + chunk])
    sinks.flush()
    elapsed = time.perf_counter() - start
    stats = next(iter(sinks.stats().values()))
    assert stats["written"] == len(points) and stats["spooled"] == 0, stats
    return len(points) / elapsed


def peer_points_per_s(url: str, points: list[Point], chunk: int) -> float:
    from influxdb_client import InfluxDBClient
    from influxdb_client import Point as IPoint
    from influxdb_client.client.write_api import SYNCHRONOUS

    client = InfluxDBClient(url=url, token="none", org="o")
    api = client.write_api(write_options=SYNCHRONOUS)
    start = time.perf_counter()
    for i in range(0, len(points), chunk):
        batch = []
        for p in points[i : i + chunk]:
            ip = IPoint(p.measurement).time(p.time_ns)
            for k, v in p.tags.items():
                ip = ip.tag(k, v)
            for k, v in p.fields.items():
                ip = ip.field(k, float(v))
            batch.append(ip)
        api.write("peer", "o", batch)
    elapsed = time.perf_counter() - start
    client.close()
    return len(points) / elapsed


def one_sink(cfg: SinkConfig, tmp: Path) -> SinkSet:
    return build_sinks(
        [cfg],
        SpoolConfig(),
        default_sqlite_path=tmp / "points.db",
        run_dir=tmp,
        default_spool_dir=tmp / "spool",
    )


def bench_sinks(n: int, tmp: Path) -> None:
    chunk = 5000
    t0 = (time.time_ns() // S - 10 * 86400) * S
    points = synthetic_points(n, t0)
    with victoria_metrics(tmp / "vm") as vm:
        rates = []
        for run in range(3):
            sinks = one_sink(
                InfluxV2SinkConfig(kind="influx_v2", url=vm.url, bucket=f"b{run}"), tmp / f"vm{run}"
            )
            shifted = [
                Point(p.measurement, p.fields, p.time_ns + run * 1000, p.tags) for p in points
            ]
            rates.append(points_per_s(sinks, shifted, chunk))
            sinks.close()
        median = statistics.median(rates)
        peer = peer_points_per_s(vm.url, synthetic_points(min(n, 50_000), t0 + 7), chunk)
        report(
            "sink victoria-metrics (influx_v2, batch 5000)",
            median,
            "points/s",
            f"runs {', '.join(f'{r:,.0f}' for r in rates)}; goal 50,000: {median / 50_000:.2f}x; "
            f"peer influxdb-client Point objects {peer:,.0f} points/s: {median / peer:.2f}x",
        )
    with influxdb_v1(tmp / "influx") as influx:
        influx.create_database("soak")
        sinks = one_sink(
            InfluxV1SinkConfig(kind="influx_v1", url=influx.url, db="soak"), tmp / "v1"
        )
        report(
            "sink influxdb 1.6 (/write, batch 5000)", points_per_s(sinks, points, chunk), "points/s"
        )
        sinks.close()
    sinks = one_sink(SqliteSinkConfig(kind="sqlite"), tmp / "sqlite")
    report("sink sqlite (embedded)", points_per_s(sinks, points, chunk), "points/s")
    sinks.close()


def started_pdns(tmp: Path) -> contextlib.AbstractContextManager[ServerProc]:
    tmp.mkdir(parents=True, exist_ok=True)
    return pdns_server(tmp)


def pdns_samplers(server: ServerProc, env_key: str) -> tuple[SamplersConfig, Callable[[], Running]]:
    cfg = SamplersConfig.model_validate(
        {
            "interval_s": 1,
            "proc": {"enabled": True},
            "prom": {
                "port": "web",
                "map": {
                    "real_memory_bytes": "pdns_auth_real_memory_usage",
                    "udp_queries": "pdns_auth_udp_queries",
                    "fd_usage": "pdns_auth_fd_usage",
                },
            },
            "http": [
                {
                    "path": "/api/v1/servers/localhost/statistics",
                    "port": "web",
                    "token_env": env_key,
                    "token_header": "X-API-Key",
                },
                {
                    "path": "/api/v1/servers/localhost/zones",
                    "port": "web",
                    "token_env": env_key,
                    "token_header": "X-API-Key",
                },
            ],
            "dig": [
                {"name": "www.example.test", "rcode": "REFUSED"},
                {"name": "www.example.test", "rcode": "REFUSED", "protocol": "tcp"},
            ],
            "files": {
                "paths": ["pdns.sqlite3*"],
                "row_counts": [{"path": "pdns.sqlite3", "query": "SELECT count(*) FROM records"}],
            },
        }
    )
    ports = {"dns": server.port, "web": server.extra_ports["web"]}
    running = Running(
        "pdns", "127.0.0.1", ports, server.pid, server.log_path, data_dir=server.workdir
    )
    return cfg, lambda: running


def bench_tick(ticks: int, tmp: Path) -> None:
    import os

    os.environ["SOAK_BENCH_PDNS_KEY"] = PDNS_API_KEY
    with started_pdns(tmp / "pdns-tick") as server, httpx.Client() as client:
        cfg, target = pdns_samplers(server, "SOAK_BENCH_PDNS_KEY")
        runner = TickRunner(build_samplers(cfg, target, http_client=client), run_tags=RUN)
        durations_ms = []
        for i in range(ticks + 5):
            start = time.perf_counter()
            points = runner.run_tick(i * S)
            if i >= 5:  # connections and imports warm
                durations_ms.append((time.perf_counter() - start) * 1000)
            assert not [p for p in points if p.tags.get("kind") == "sampler_error"], points
        runner.close()
    q = statistics.quantiles(durations_ms, n=20)
    median_ms = statistics.median(durations_ms)
    report(
        f"full tick, 6 samplers against pdns-server ({len(points)} points)",
        median_ms,
        "ms median",
        f"p95 {q[18]:.1f} ms over {ticks} ticks; goal 100 ms: {100 / median_ms:.1f}x under",
    )


def self_memory() -> tuple[int, int]:
    values = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon"):
            values[key] = int(rest.split()[0]) * 1024
    return values["VmRSS"], values["RssAnon"]


def bench_memory(ticks: int, interval_s: float, tmp: Path) -> None:
    """Ticks on the absolute 1-s grid, every sampler, written to SQLite and VictoriaMetrics."""
    import os

    os.environ["SOAK_BENCH_PDNS_KEY"] = PDNS_API_KEY
    warmup = min(60, ticks // 4)
    with (
        started_pdns(tmp / "pdns-mem") as server,
        victoria_metrics(tmp / "vm-mem") as vm,
        httpx.Client() as client,
    ):
        cfg, target = pdns_samplers(server, "SOAK_BENCH_PDNS_KEY")
        metrics = ServiceMetrics(CollectorRegistry())
        runner = TickRunner(
            build_samplers(cfg, target, http_client=client), run_tags=RUN, metrics=metrics
        )
        sinks = build_sinks(
            [SqliteSinkConfig(kind="sqlite"), InfluxV2SinkConfig(kind="influx_v2", url=vm.url)],
            SpoolConfig(),
            default_sqlite_path=tmp / "mem.db",
            run_dir=tmp / "mem",
            default_spool_dir=tmp / "mem" / "spool",
            metrics=metrics,
        )
        origin = time.time_ns() + S
        samples: list[tuple[int, int, int]] = []
        grid = TickGrid.every(interval_s, origin)
        tick_ns = origin
        for i in range(ticks):
            tick_ns = grid.at_or_after(time.time_ns()) if i else origin
            delay_s = (tick_ns - time.time_ns()) / S
            if delay_s > 0:
                time.sleep(delay_s)
            sinks.write(runner.run_tick(tick_ns))
            if i >= warmup and (i - warmup) % max(1, (ticks - warmup) // 20) == 0:
                samples.append((i, *self_memory()))
                rss, anon = samples[-1][1:]
                print(
                    f"  tick {i}: RSS {rss / 2**20:.2f} MiB, anon {anon / 2**20:.2f} MiB",
                    flush=True,
                )
        samples.append((ticks, *self_memory()))
        runner.close()
        sinks.close()
    first, last = samples[0], samples[-1]
    peak = max(s[1] for s in samples)
    report(
        f"memory over {ticks} ticks at {interval_s:g} s (warm-up {warmup})",
        (last[1] - first[1]) / 1024,
        "KiB RSS growth after warm-up",
        f"RSS {first[1] / 2**20:.1f} -> {last[1] / 2**20:.1f} MiB (peak {peak / 2**20:.1f}), "
        f"anon {first[2] / 2**20:.1f} -> {last[2] / 2**20:.1f} MiB",
    )


def report(what: str, value: float, unit: str, note: str = "") -> None:
    print(f"{what}: {value:,.1f} {unit}" + (f"  ({note})" if note else ""), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["all", "sinks", "tick", "memory"], default="all")
    ap.add_argument("--points", type=int, default=200_000)
    ap.add_argument("--tick-runs", type=int, default=100)
    ap.add_argument("--ticks", type=int, default=300, help="memory part: ticks (1,800 = 30 min)")
    ap.add_argument("--interval-s", type=float, default=1.0)
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny sizes: that it runs")
    args = ap.parse_args()
    if args.smoke:
        args.points, args.tick_runs, args.ticks, args.interval_s = 3000, 5, 8, 0.2
    with tempfile.TemporaryDirectory(prefix="soak-bench-") as tmp_name:
        tmp = Path(tmp_name)
        if args.part in ("all", "sinks"):
            bench_sinks(args.points, tmp)
        if args.part in ("all", "tick"):
            bench_tick(args.tick_runs, tmp)
        if args.part in ("all", "memory"):
            bench_memory(args.ticks, args.interval_s, tmp)


if __name__ == "__main__":
    main()
