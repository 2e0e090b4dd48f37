"""Records the labelled leak corpus (tests/fixtures/leaks/*.json) with soak itself.

    .venv/bin/python bench/record_leak_corpus.py                      # every case, 6 min each
    .venv/bin/python bench/record_leak_corpus.py --only leak-slow-above --steady-s 1200
    .venv/bin/python bench/record_leak_corpus.py --jobs 3 --out /tmp/corpus

Each case is a real soak run (`soak start --foreground`) of testbed/refdns started with
one `-shape` (testbed/refdns/shapes.go) or none, or of a real server (Debian's unbound,
kresd, pdns-recursor, dnsmasq), forwarding to a dnsmasq upstream under a steady
cached/local/blocked mix (plus unique names where a cache is to fill), sampled every
second: anonymous RSS, fds and threads from /proc, and for refdns goroutines and heap in
use from its /metrics. The run's samples are then read
back from its store and written as a fixture with the case's label
(tests/support/leakcorpus.py owns the format and the time scale).

Rates are chosen against the default thresholds at the corpus's time scale (60: a
recorded second stands for a minute, so 5 MiB/h is 5 MiB per recorded minute). The
leak's onset is given from the server's start; the fixture's onset is from the first
tick, which comes within a tick of the start (the ready probes take well under a second).
`--steady-s` records longer; `--jobs` runs cases side by side (each takes about a tenth
of a core at the default 200 q/s).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support, bench

from bench.leak_corpus_cases import (
    CASES,
    REAL_TIME_MODE,
    STRETCHED,
    TIME_SCALE,
    Case,
    Mode,
    dnsmasq_argv,
)
from bench.leak_corpus_real_time import CASES as REAL_TIME_CASES
from bench.leak_corpus_real_time import REFDNS_ACCOUNTING, zipf_queries
from tests.support.leakcorpus import FIXTURES, MEASUREMENT, REAL_TIME, Fixture, save

from soak.analysis.scenario_sections import LeaksConfig
from soak.clock import ns_to_s
from soak.samplers.server import parse_bind_stats
from soak.sinks.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parent.parent
SOAK = ROOT / ".venv" / "bin" / "soak"
REFDNS = ROOT / "build" / "refdns" / "refdns"
QUERIES = ROOT / "scenarios" / "queries"
TOKEN = "soak-corpus-token"
ZIPF_FILE = Path(tempfile.gettempdir()) / "soak-leak-corpus-zipf.txt"  # seeded: made again at will


def scaled_leaks() -> dict[str, object]:
    """The default leaks config at the corpus's time scale: the run's own verdicts agree
    with the replay's (which stretches the clock instead)."""
    d = LeaksConfig()
    return {
        "window_s": f"{d.window_s / TIME_SCALE:g}s",
        "interval_s": f"{max(1.0, d.interval_s / TIME_SCALE):g}s",
        "min_windows": d.min_windows,
        "thresholds": {k: v * TIME_SCALE for k, v in d.thresholds.items()},
    }


REFDNS_PROM = {
    "port": "api",
    "path": "/metrics",
    "map": {"goroutines": "go_goroutines", "heap_inuse_bytes": "go_memstats_heap_inuse_bytes"},
}


def scenario(
    case: Case, warmup_s: float, steady_s: float, mode: Mode = STRETCHED, zipf: Path | None = None
) -> dict[str, object]:
    mix: list[dict[str, object]] = [
        {"name": "cached", "weight": 5, "file": str(QUERIES / "cached.txt")},
        {"name": "local", "weight": 2, "file": str(QUERIES / "local.txt")},
        {"name": "blocked", "weight": 2, "file": str(QUERIES / "blocked.txt")},
    ]
    if case.miss_weight:
        mix.append({"name": "miss", "weight": case.miss_weight, "random": {"zone": "miss.example"}})
    if case.zipf_weight and zipf is not None:
        mix.append({"name": "zipf", "weight": case.zipf_weight, "file": str(zipf)})
    prom = None if case.target else {**REFDNS_PROM}
    if case.prom:
        prom = {"port": "api", "path": "/metrics", "map": dict(case.prom)}
    elif prom and mode.real_time:
        prom["map"] = {**REFDNS_PROM["map"], **REFDNS_ACCOUNTING}  # type: ignore[dict-item]
    return {
        "name": f"corpus-{case.name}",
        "description": f"leak corpus: {case.name}",
        "services": [
            {
                "runtime": "process",
                "name": "upstream",
                "version": "dnsmasq",
                "argv": dnsmasq_argv(
                    "{data_dir}/dnsmasq.pid",
                    "--cache-size=0",
                    "--address=/#/192.0.2.1",
                    "--local-ttl=3600",
                ),
                "ports": {"dns": {"protocol": "both"}},
            }
        ],
        "target": case.target
        or {
            "runtime": "process",
            "name": "refdns",
            "version": case.name,
            "argv": [
                str(REFDNS),
                "-dns=127.0.0.1:{port.dns}",
                "-api=127.0.0.1:{port.api}",
                "-data={data_dir}",
                "-upstream=127.0.0.1:{service.upstream.port.dns}",
                "-querylog-max-rows=20000",
                *case.args,
            ],
            "env": {"REFDNS_TOKEN": TOKEN, "MALLOC_ARENA_MAX": "2", **case.env},
            "ports": {"dns": {"protocol": "both"}, "api": {}},
            "ready": {
                "probes": [{"kind": "http", "port": "api", "path": "/healthz/ready"}],
                "timeout_s": "20s",
            },
            "on_exit": "fail",
        },
        "load": {
            "rate_qps": mode.rate_qps,
            "workers": 1,
            "flows": 16,
            "timeout_s": "2s",
            "mix": mix,
        },
        "phases": [
            {"name": "warmup", "duration_s": f"{warmup_s:g}s", "warmup": True},
            {"name": "steady", "duration_s": f"{steady_s:g}s"},
        ],
        "samplers": {"interval_s": f"{mode.tick_s:g}s", **({"prom": prom} if prom else {})},
        "leaks": {} if mode.real_time else scaled_leaks(),
        "criteria": {"p99_ms_max": {}, "lost_ratio_max": 0.01},
    }


def record(case: Case, out: Path, warmup_s: float, steady_s: float, mode: Mode = STRETCHED) -> Path:
    steady_s = case.steady_s if case.steady_s is not None else steady_s
    with tempfile.TemporaryDirectory(prefix="lc-") as tmp:  # short: unix socket paths
        data = Path(tmp)
        path = data / "scenario.yaml"
        zipf = ZIPF_FILE if case.zipf_weight else None
        control = data / "unbound.ctl"
        doc = yaml.safe_dump(scenario(case, warmup_s, steady_s, mode, zipf), sort_keys=False)
        stats_port = free_tcp_port()
        doc = doc.replace("{control}", str(control)).replace("{stats_port}", str(stats_port))
        path.write_text(doc)
        poller = None
        if case.accounting == "unbound":
            poller = AccountingPoller(unbound_figures(control), mode.tick_s)
        elif case.accounting == "bind":
            poller = AccountingPoller(bind_figures(stats_port), mode.tick_s)
        if poller:
            poller.start()
        started = time.time()
        done = subprocess.run(
            [str(SOAK), "start", str(path), "--foreground", "--data-dir", str(data)],
            capture_output=True,
            text=True,
            check=False,
        )
        if poller:
            poller.stop()
        if done.returncode not in (0, 1):
            raise RuntimeError(f"{case.name}: soak exited {done.returncode}: {done.stderr[-2000:]}")
        runs = json.loads(
            subprocess.run(
                [str(SOAK), "list", "--data-dir", str(data), "--json"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        run_id = runs[-1]["id"]
        series, t0_ns = read_series(data / "points.db", run_id, mode.tick_s)
        if poller:
            series.update(poller.series(t0_ns, mode.tick_s))
    how = (
        f"recorded in real time by bench/record_leak_corpus.py --real-time on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, {socket.gethostname()} "
        f"({os.cpu_count()} cores): soak start --foreground, {mode.tick_s:g}-s ticks, "
        f"{warmup_s:g} s warm-up, {steady_s:g} s steady"
        if mode.real_time
        else ""
    )
    fx = Fixture(
        name=case.name,
        source=source(case, mode.rate_qps)
        + (f", {case.miss_weight}/18 unique names" if case.miss_weight else ""),
        tick_s=mode.tick_s,
        time_scale=mode.time_scale,
        warmup_s=warmup_s,
        series=series,
        labels={r: lab for r, lab in case.labels.items() if r in series},
        half=case.half,
        recorded=how,
    )
    target = out / (f"{case.name}.json.gz" if mode.real_time else f"{case.name}.json")
    save(fx, target)
    return target


def free_tcp_port() -> int:
    """A loopback TCP port free now (the kernel's pick), for a server's statistics channel."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Figures = Callable[[], "dict[str, float] | None"]


def unbound_figures(control: Path) -> Figures:
    """unbound's own accounting through `unbound-control stats_noreset`: the cache's memory
    and entries and the queries it counted (None: not up yet, or gone)."""
    conf = control.with_suffix(".conf")
    conf.write_text(
        f'remote-control:\n    control-enable: yes\n    control-interface: "{control}"\n'
        "    control-use-cert: no\n"
    )

    def fetch() -> dict[str, float] | None:
        got = subprocess.run(
            ["unbound-control", "-c", str(conf), "stats_noreset"],
            capture_output=True,
            text=True,
            check=False,
        )
        if got.returncode != 0:
            return None
        stats = dict(line.split("=", 1) for line in got.stdout.splitlines() if "=" in line)
        try:
            return {
                "cache_bytes": float(stats["mem.cache.rrset"]) + float(stats["mem.cache.message"]),
                "cache_entries": float(stats["msg.cache.count"])
                + float(stats["rrset.cache.count"]),
                "server_queries": float(stats["total.num.queries"]),
            }
        except KeyError:
            return None

    return fetch


def bind_figures(port: int) -> Figures:
    """BIND's statistics channel (/json/v1): what soak's `server` sampler reads of it
    (soak.samplers.server.parse_bind_stats: the queries, its cache's bytes and nodes), and
    all its memory contexts in use."""

    def fetch() -> dict[str, float] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/v1", timeout=5) as r:
                doc = json.loads(r.read())
            fields = {k: float(v) for k, v in parse_bind_stats(doc).items()}
            return {**fields, "server_memory_bytes": float(doc["memory"]["InUse"])}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    return fetch


class AccountingPoller:
    """A server's own accounting (a `Figures` call) every tick, beside the run, with the
    wall time of each answer."""

    def __init__(self, figures: Figures, tick_s: float) -> None:
        self._figures = figures
        self._tick_s = tick_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.samples: list[tuple[int, dict[str, float]]] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._tick_s / 2):
            values = self._figures()
            if values is not None:  # a missing sample stays null
                self.samples.append((time.time_ns(), values))

    def series(self, t0_ns: int, tick_s: float) -> dict[str, list[float | None]]:
        """On the run's ticks: the last sample at or before each tick."""
        if not self.samples:
            return {}
        last_i = round((self.samples[-1][0] - t0_ns) / (tick_s * 1e9))
        out: dict[str, list[float | None]] = {k: [None] * (last_i + 1) for k in self.samples[0][1]}
        for t_ns, values in self.samples:
            i = math.floor((t_ns - t0_ns) / (tick_s * 1e9))
            if 0 <= i <= last_i:
                for k, v in values.items():
                    out[k][i] = v
        return out


def source(case: Case, rate_qps: int = 200) -> str:
    if case.target is not None:
        files = case.target.get("files")
        conf = files[0]["content"] if files else " ".join(case.target["argv"])  # type: ignore[index]
        said = f"{case.target['name']} (Debian's), config: {conf.strip()}"
    else:
        said = f"refdns {' '.join(case.args) or '(no shape)'}"
    miss = f", {case.miss_weight}/18 of them unique names" if case.miss_weight else ""
    zipf = f", {case.zipf_weight}/18 Zipf names" if case.zipf_weight else ""
    return f"{said}; {rate_qps} q/s{miss}{zipf}"


def read_series(
    db: Path, run_id: str, tick_s: float = 1.0
) -> tuple[dict[str, list[float | None]], int]:
    """Each resource as one value a tick from the run's first tick (null: no sample), and
    that first tick's time."""
    store = SqliteStore(db)
    try:
        raw = {}
        for resource, measurement in MEASUREMENT.items():
            found = store.series(run_id, measurement, resource)
            if found:
                raw[resource] = [(t, float(v)) for t, v in found[0][1]]  # type: ignore[arg-type]
    finally:
        store.close()
    t0 = min(s[0][0] for s in raw.values() if s)
    out: dict[str, list[float | None]] = {}
    for resource, samples in raw.items():
        values: list[float | None] = [None] * (round(ns_to_s(samples[-1][0] - t0) / tick_s) + 1)
        for t, v in samples:
            values[round(ns_to_s(t - t0) / tick_s)] = int(v) if v.is_integer() else v
        out[resource] = values
    return out, t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="case names (default: all)")
    ap.add_argument("--warmup-s", type=float, default=60.0)
    ap.add_argument("--steady-s", type=float, default=300.0)
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--real-time",
        action="store_true",
        help="the real-time corpus (bench/leak_corpus_real_time.py): 10-s ticks, 2-h steady",
    )
    args = ap.parse_args()
    mode = STRETCHED
    cases_all = CASES
    if args.real_time:
        mode, cases_all = REAL_TIME_MODE, REAL_TIME_CASES
        if args.warmup_s == 60.0:
            args.warmup_s = 600.0
        if args.steady_s == 300.0:
            args.steady_s = 7200.0
    args.out = args.out or (REAL_TIME if args.real_time else FIXTURES)
    names = {c.name for c in cases_all}
    unknown = set(args.only or []) - names
    if unknown:
        print(f"record_leak_corpus: unknown case(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    cases = [c for c in cases_all if not args.only or c.name in args.only]
    args.out.mkdir(parents=True, exist_ok=True)
    if any(c.zipf_weight for c in cases):
        zipf_queries(ZIPF_FILE)  # once, before the cases start side by side
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {
            c.name: pool.submit(record, c, args.out, args.warmup_s, args.steady_s, mode)
            for c in cases
        }
        failed = 0
        for name, fut in futures.items():
            try:
                print(f"{name}: {fut.result()}")
            except Exception as e:  # one case failing is reported, the rest go on
                print(f"{name}: FAILED {e}", file=sys.stderr)
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
