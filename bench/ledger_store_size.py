"""The run store's growth at 1-s windows, with the latency histograms and without.

Runs a real foreground soak against unbound on loopback (one phase at `--rate` q/s for
`--duration` s, 1-s sampler ticks, a two-class mix), then measures its store: the file
after VACUUM, the bytes of the windows' `lat_hist` texts, and the file again with the
`lat_hist` rows deleted and VACUUMed; per window, and extrapolated to a day of 1-s windows.

    .venv/bin/python bench/ledger_store_size.py [--rate 1000] [--duration 120]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.servers import unbound  # noqa: E402

DAY_S = 86_400


def scenario(path: Path, port: int, rate_qps: int, duration_s: int) -> Path:
    doc = {
        "name": "store-size",
        "target": {
            "runtime": "external",
            "name": "unbound",
            "ports": {"dns": {"host": port, "protocol": "both"}},
        },
        "phases": [{"name": "steady", "duration_s": f"{duration_s}s", "rate_qps": rate_qps}],
        "samplers": {"interval_s": 1},
        "load": {
            "workers": 1,
            "mix": [
                {"name": "hit", "weight": 3, "queries": ["www.example.test A"]},
                {"name": "miss", "random": {"zone": "example.test"}},
            ],
        },
    }
    out = path / "s.json"
    out.write_text(json.dumps(doc))
    return out


def vacuumed_bytes(db: Path) -> int:
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("VACUUM")
    con.close()
    return db.stat().st_size


def measure(db: Path) -> dict[str, float]:
    with_hist = vacuumed_bytes(db)
    con = sqlite3.connect(db)
    windows = con.execute(
        "SELECT COUNT(*) FROM samples v JOIN series s ON s.id = v.series_id"
        " WHERE s.measurement = 'load' AND s.tags LIKE '%\"class\":\"all\"%' AND v.field = 'due'"
    ).fetchone()[0]
    text_bytes, hist_rows = con.execute(
        "SELECT SUM(LENGTH(txt)), COUNT(*) FROM samples WHERE field = 'lat_hist'"
    ).fetchone()
    con.execute("DELETE FROM samples WHERE field = 'lat_hist'")
    con.commit()
    con.close()
    without = vacuumed_bytes(db)
    per_window = (with_hist - without) / windows
    return {
        "windows": windows,
        "lat_hist_rows": hist_rows,
        "lat_hist_text_bytes_per_window": text_bytes / windows,
        "file_bytes_with": with_hist,
        "file_bytes_without": without,
        "bytes_per_window_with": with_hist / windows,
        "bytes_per_window_without": without / windows,
        "histogram_bytes_per_window": per_window,
        "day_mib_with": with_hist / windows * DAY_S / 2**20,
        "day_mib_without": without / windows * DAY_S / 2**20,
        "day_mib_histograms": per_window * DAY_S / 2**20,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--duration", type=int, default=120)
    ap.add_argument("--smoke", action="store_true", help="a few seconds at 200 q/s")
    args = ap.parse_args()
    if args.smoke:
        args.rate, args.duration = 200, 5
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "unbound").mkdir()
        with unbound(work / "unbound") as server:
            data = work / "data"
            argv = [sys.executable, "-m", "soak.cli", "start"]
            argv += [str(scenario(work, server.port, args.rate, args.duration))]
            argv += ["--foreground", "--json", "--data-dir", str(data)]
            proc = subprocess.run(argv, capture_output=True, text=True)
            if proc.returncode not in (0, 1):
                sys.exit(proc.stderr[-2000:])
        db = work / "points.db"
        shutil.copy(data / "points.db", db)
        figures = measure(db)
    print(json.dumps({"rate_qps": args.rate, "duration_s": args.duration, **figures}, indent=2))


if __name__ == "__main__":
    main()
