"""Disk per run of the shipped scenarios: the embedded store and InfluxDB 1.6.

Runs each scenario for real (`soak start --foreground --duration D`, its own tick and
leak window sizes; `--duration` scales its phases) with an influx_v1 sink into a real
InfluxDB 1.6 on loopback beside the embedded store, then reads what was written:

- per measurement, the samples (one field of one point) per time stamp and the stamps'
  cadence (the median gap), so that bytes an hour are the scenario's own rates, not the
  few minutes it ran: a 60-s tick writes `process` once a minute, the ledger's `load`
  points are one a second whatever the tick;
- the embedded store's bytes a sample (points.db after VACUUM, indexes included);
- InfluxDB's bytes a sample (its shard's TSM files, once the cache is snapshotted:
  `cache-snapshot-write-cold-duration` 1 s here; a few minutes compress worse than a
  day, so this is an upper bound).

    .venv/bin/python bench/scenario_disk.py [--scenario unbound-cache ...] [--duration 4m] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support

from tests.support.tsdb import InfluxV1, influxdb_v1  # noqa: E402

DB = "soak"
HOUR_S = 3600
# The process scenarios of scenarios/ (docker ones need their images; the same samplers).
SCENARIOS = ("unbound-cache", "pdns-recursor-dnsmasq", "refdns-demo", "pdns-auth")
# refdns-demo's phases are its own 90 s, not a scaled day: run as written.
AS_WRITTEN = {"refdns-demo"}


def influxdb(work: Path) -> contextlib.AbstractContextManager[InfluxV1]:
    """InfluxDB 1.6 that writes its cold shards to disk within a second, so that what a
    run wrote is counted on disk."""
    return influxdb_v1(work, '  cache-snapshot-write-cold-duration = "1s"\n')


def run(scenario: str, work: Path, influx: InfluxV1, duration: str) -> str:
    data = work / f"data-{scenario}"
    sink = {"kind": "influx_v1", "url": influx.url, "db": DB}
    argv = [str(Path(sys.executable).parent / "soak"), "start"]
    argv += [str(ROOT / "scenarios" / f"{scenario}.yaml"), "--foreground"]
    argv += ["--data-dir", str(data), "--set", f"sinks=[{json.dumps(sink)}]"]
    if scenario not in AS_WRITTEN:
        argv += ["--duration", duration]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=work)
    if proc.returncode not in (0, 1):
        sys.exit(f"{scenario}: exit {proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return str(data / "points.db")


def owed_points(data: Path, run_id: str) -> dict[str, int]:
    """What the run's sinks still owed at its end (soak status); the next command on the
    data directory (`soak list` here) replays it, so that InfluxDB's count is the run's."""
    soak = str(Path(sys.executable).parent / "soak")
    argv = [soak, "status", run_id, "--data-dir", str(data), "--json"]
    status = json.loads(subprocess.run(argv, capture_output=True, text=True).stdout)
    owed: dict[str, int] = status.get("owed", {})
    deadline = time.monotonic() + 120
    while owed and time.monotonic() < deadline:
        subprocess.run([soak, "list", "--data-dir", str(data)], capture_output=True)
        argv_now = [soak, "status", run_id, "--data-dir", str(data), "--json"]
        now = json.loads(subprocess.run(argv_now, capture_output=True, text=True).stdout)
        if not now.get("owed"):
            break
        time.sleep(2)
    return owed


def cadence(db: sqlite3.Connection) -> dict[str, dict[str, float]]:
    """Per measurement: samples, distinct stamps, samples a stamp, median gap (s)."""
    out = {}
    sql = (
        "SELECT s.measurement, v.time_ns, COUNT(*) FROM samples v"
        " JOIN series s ON s.id = v.series_id GROUP BY s.measurement, v.time_ns ORDER BY 1, 2"
    )
    rows: dict[str, list[tuple[int, int]]] = {}
    for m, t, n in db.execute(sql):
        rows.setdefault(m, []).append((t, n))
    run_s = len(rows.get("load", [])) or 1  # the ledger's 1-s windows: the run's seconds
    for m, stamps in rows.items():
        gaps = [(b[0] - a[0]) / 1e9 for a, b in pairwise(stamps)]
        samples = sum(n for _t, n in stamps)
        gap_s = statistics.median(gaps) if gaps else 0.0
        out[m] = {
            "samples": samples,
            "stamps": len(stamps),
            "samples_per_stamp": samples / len(stamps),
            "gap_s": gap_s,
            "per_hour": _per_hour(m, samples, len(stamps), gap_s, run_s),
        }
    return out


def _per_hour(measurement: str, samples: int, stamps: int, gap_s: float, run_s: int) -> float:
    """Samples an hour: at the measurement's own cadence; events (irregular) at their rate
    over the run; `latency` (one point per phase and class, at the run's end) not at all."""
    if measurement == "latency":
        return 0.0
    if measurement == "event" or not gap_s:
        return samples * HOUR_S / run_s
    return samples / stamps * HOUR_S / gap_s


def store_bytes(path: str) -> tuple[int, int]:
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("VACUUM")
    samples = db.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
    db.close()
    return Path(path).stat().st_size, samples


def influx_bytes(influx: InfluxV1, run_id: str) -> tuple[int, int]:
    """TSM bytes of the database and the samples it holds for the run (one count per field)."""
    deadline = time.monotonic() + 60
    data = influx.workdir / "data" / DB
    while time.monotonic() < deadline and not list(data.rglob("*.tsm")):
        time.sleep(1)
    time.sleep(3)  # a snapshot running when the first file appeared
    size = sum(p.stat().st_size for p in data.rglob("*.tsm"))
    samples = 0
    for series in influx.query(f"SELECT COUNT(*) FROM /.*/ WHERE \"soak\" = '{run_id}'", DB):
        samples += sum(v for v in series["values"][0][1:] if v)
    return size, samples


def measure(scenario: str, work: Path, duration: str) -> dict[str, object]:
    with influxdb(work / scenario) as influx:
        influx.create_database(DB)
        path = run(scenario, work, influx, duration)
        db = sqlite3.connect(path)
        (run_id,) = db.execute("SELECT DISTINCT soak FROM series").fetchone()
        owed = owed_points(Path(path).parent, run_id)
        per_m = cadence(db)
        tick_s = per_m["process"]["gap_s"]
        db.close()
        file_bytes, samples = store_bytes(path)
        tsm_bytes, influx_samples = influx_bytes(influx, run_id)
    per_hour = sum(m["per_hour"] for m in per_m.values())
    sqlite_per_sample = file_bytes / samples
    influx_per_sample = tsm_bytes / influx_samples if influx_samples else float("nan")
    return {
        "scenario": scenario,
        "tick_s": tick_s,
        # the samplers' (the ledger's `load` is per second whatever the tick)
        "samples_per_tick": sum(
            m["samples_per_stamp"] for k, m in per_m.items() if m["gap_s"] == tick_s and k != "load"
        ),
        "measurements": per_m,
        "samples": samples,
        "samples_per_hour": per_hour,
        "sqlite_bytes_per_sample": sqlite_per_sample,
        "sqlite_mib_per_hour": per_hour * sqlite_per_sample / 2**20,
        "sqlite_mib_per_day": 24 * per_hour * sqlite_per_sample / 2**20,
        "owed_at_end": owed,  # points InfluxDB had not taken when the run ended
        "influx_samples": influx_samples,
        "influx_tsm_bytes_per_sample": influx_per_sample,
        "influx_mib_per_day": 24 * per_hour * influx_per_sample / 2**20,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", action="append", choices=SCENARIOS)
    ap.add_argument("--duration", default="4m")
    ap.add_argument("--keep", action="store_true", help="keep the data directories")
    ap.add_argument("--smoke", action="store_true", help="unbound-cache for 20 s")
    args = ap.parse_args()
    if args.smoke:
        args.scenario, args.duration = ["unbound-cache"], "20s"
    results = []
    tmp = tempfile.mkdtemp(prefix="soak-disk-")
    try:
        for scenario in args.scenario or SCENARIOS:
            results.append(measure(scenario, Path(tmp), args.duration))
            print(json.dumps(results[-1], indent=1), flush=True)
    finally:
        if args.keep:
            print(f"kept: {tmp}", flush=True)
        else:
            shutil.rmtree(tmp)
    for r in results:
        print(
            f"{r['scenario']}: tick {r['tick_s']:g} s, {r['samples_per_tick']:.0f} samples a tick,"
            f" {r['samples_per_hour']:,.0f} samples an hour; sqlite"
            f" {r['sqlite_bytes_per_sample']:.1f} B a sample, {r['sqlite_mib_per_hour']:.1f} MiB"
            f" an hour, {r['sqlite_mib_per_day']:.0f} MiB a day; influx TSM"
            f" {r['influx_tsm_bytes_per_sample']:.1f} B a sample, {r['influx_mib_per_day']:.0f}"
            " MiB a day"
        )


if __name__ == "__main__":
    main()
