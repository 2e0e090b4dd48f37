"""A short real soak and a real upgrade that write every series into a real InfluxDB 1.6,
for the queries of the Grafana dashboards and alert rules (test_grafana_queries.py).

The soak is the real command (`soak start --foreground`) with 1-s ticks: a real
pdns-server under load from two local load agents, every sampler (proc, prom, http
API, dig, files, load), leak verdicts, and two influx_v1 sinks, one of them on a
port where nothing listens (it spools: a `sink_down` event). During the warm-up the
server is killed once (the service restarts it: `exited` and `restarted` events).
The upgrade dashboard's `upgrade_check` points come from a real `soak upgrade` of
the pdns plan.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support import grafana as g
from tests.support.pdns import create_pdns_db
from tests.support.procs import cmdlines
from tests.support.servers import free_port
from tests.support.tsdb import InfluxV1, influxdb_v1

DB = "soak"
API_KEY = "soak-grafana-test-key"
# After the server first appears: within the warm-up, which leak verdicts leave out, so
# the restart does not cut the steady phase's growth in two.
KILL_AFTER_S = 3.0
RUN_TIMEOUT_S = 240.0


def _pdns_conf() -> str:
    return (
        "\n".join([
            "launch=gsqlite3", "gsqlite3-database={data_dir}/pdns.sqlite3",
            "local-address=127.0.0.1", "local-port={port.dns}", "api=yes",
            f"api-key={API_KEY}", "webserver=yes", "webserver-address=127.0.0.1",
            "webserver-port={port.web}", "webserver-allow-from=127.0.0.0/8",
            "security-poll-suffix=", "daemon=no", "guardian=no", "disable-syslog=yes",
            "socket-dir={run_dir}", "loglevel=4", "setuid=", "setgid=",
            "distributor-threads=1", "receiver-threads=1",
            # Cached answers kept for the whole run: each new random name of the load's
            # `miss` class adds to the caches until the end, so memory rises steadily
            # (with the default 20-s TTLs the caches level off within the run, and the
            # leak analysis rightly stops calling it `growing`).
            "cache-ttl=3600", "negquery-cache-ttl=3600", "query-cache-ttl=3600",
        ])
        + "\n"
    )  # fmt: skip


def scenario(data_dir: Path, influx_url: str, dead_url: str) -> dict[str, Any]:
    # pdns-server is C++: it has no goroutines and no Go heap. Its own figures stand in
    # for them (the scenario's prom map), so that every runtime panel is exercised. The
    # "heap" is its packet cache's entries: one more for each new name of the load's
    # `miss` class, kept for the run (cache-ttl), so it rises every second and its last
    # verdict is `growing`; RSS rises as much but glibc gives some back when it trims,
    # and a run could end on such a fall, judged `ok` (the leak alert then saw nothing).
    runtime_map = {
        "heap_inuse_bytes": "pdns_auth_packetcache_size",
        "heap_alloc_bytes": "pdns_auth_real_memory_usage",
        "goroutines": "pdns_auth_qsize_q",
        "querylog_dropped_total": "pdns_auth_overload_drops",
        # the caches' panel: pdns-auth's packet cache, as a recursor's is mapped (not
        # cache_entries: the leak analysis would call the filling memory explained)
        "packetcache_entries": "pdns_auth_packetcache_size",
    }
    return {
        "name": "grafana-queries",
        "target": {
            "runtime": "process",
            "name": "pdns-auth",
            "version": "4.7",
            "argv": ["pdns_server", "--config-dir={run_dir}"],
            "data_dir": str(data_dir),
            "ports": {"dns": {"protocol": "both"}, "web": {}},
            "files": [{"dest": "pdns.conf", "content": _pdns_conf()}],
            "ready": {
                "probes": [{"kind": "dns", "name": "www.example.test", "answer": "192.0.2.10"}],
                "timeout_s": 30,
            },
            "on_exit": "restart",
            "max_restarts": 2,
        },
        "load": {
            "rate_qps": 300,
            "flows": 16,
            # Two local load agents: the run's total and each agent's part (tag `agent`)
            # both reach InfluxDB, for the total's panels and the per-agent one.
            "agents": {"count": 2, "engine": "local"},
            "mix": [
                {
                    "name": "local",
                    "weight": 3,
                    "queries": ["www.example.test A", "mail.example.test A"],
                    "expect": {"rcodes": ["NOERROR"]},
                },
                {
                    "name": "miss",
                    "weight": 1,
                    "random": {"zone": "example.test"},
                    "expect": {"rcodes": ["NXDOMAIN"]},
                },
            ],
        },
        "phases": [
            {"name": "warmup", "duration_s": 8, "warmup": True},
            {"name": "steady", "duration_s": 18},
        ],
        "samplers": {
            "interval_s": 1,
            "prom": {"port": "web", "map": runtime_map},
            "http": [
                {
                    "path": "/api/v1/servers/localhost/statistics",
                    "port": "web",
                    "headers": {"X-API-Key": API_KEY},
                }
            ],
            "dig": [{"name": "www.example.test", "answer": "192.0.2.10"}],
            "smaps": {"top_paths": 4},
            "files": {
                "paths": ["pdns.sqlite3"],
                "row_counts": [{"path": "pdns.sqlite3", "query": "SELECT count(*) FROM records"}],
            },
        },
        "sinks": [
            {"kind": "influx_v1", "url": influx_url, "db": DB},
            {"kind": "influx_v1", "url": dead_url, "db": DB, "timeout_s": 2},
        ],
        # 1-s windows and a threshold of 1 unit per hour: the server's memory, filling
        # its caches under load, is judged `growing` within seconds.
        "leaks": {
            "window_s": 1,
            "min_windows": 3,
            "interval_s": 2,
            "startup_max_s": 0,  # filling from the start: judged at once
            "thresholds": {r: "1/h" for r in ("rss_anon_bytes", "heap_inuse_bytes", "fds")},
        },
        "criteria": {"lost_ratio_max": None, "restarts_max": None, "leaks_ok": False},
        # the dashboards' team filter (the tag `team` of every point)
        "alerting": {"labels": {"team": "dns"}},
    }


def make_pdns_db(data_dir: Path) -> None:
    db = data_dir / "pdns.sqlite3"
    create_pdns_db(db)
    soa = "ns.example.test. hostmaster.example.test. 1 3600 600 86400 3600"
    sql = (
        "INSERT INTO domains (id, name, type) VALUES (1, 'example.test', 'NATIVE');"
        "INSERT INTO records (domain_id, name, type, content, ttl) VALUES"
        f" (1, 'example.test', 'SOA', '{soa}', 3600),"
        " (1, 'www.example.test', 'A', '192.0.2.10', 3600),"
        " (1, 'mail.example.test', 'A', '192.0.2.11', 3600);"
    )
    subprocess.run(["sqlite3", str(db)], input=sql.encode(), check=True)


def _server_pids(marker: str) -> list[int]:
    """pdns_server processes whose command line names `marker` (this test's directory)."""
    pids = []
    for pid, raw in cmdlines():
        argv = raw.split(b"\0")
        if argv[0].endswith(b"pdns_server") and any(marker.encode() in a for a in argv):
            pids.append(pid)
    return pids


def run_upgrade(work: Path, influx_url: str) -> subprocess.CompletedProcess[str]:
    """The pdns upgrade plan (scenarios/pdns-auth-upgrade.yaml) with an influx_v1 sink:
    the `upgrade_check` points of the upgrade dashboard."""
    archive = work / "pdns-auth-4.3.1.tar.gz"
    script = g.ROOT / "scripts" / "make-pdns-4.3.1-archive.py"
    subprocess.run([sys.executable, str(script), str(archive)], check=True, capture_output=True)
    sink = {"kind": "influx_v1", "url": influx_url, "db": DB}
    argv = [
        str(Path(sys.executable).parent / "soak"), "upgrade",
        str(g.ROOT / "scenarios" / "pdns-auth-upgrade.yaml"),
        "--set", f"data.archive={archive}", "--set", f"sinks=[{json.dumps(sink)}]",
        "--work-dir", str(work),
    ]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=work)


@dataclass
class Soaked:
    influx: InfluxV1
    run_id: str
    start_ns: int
    end_ns: int
    output: str
    home: Path  # the soak's data directory (its run directory holds the report)


def _kill_server_once(home: Path, soak: subprocess.Popen[str]) -> bool:
    """Waits for the target, lets it run KILL_AFTER_S, then SIGKILLs it (once)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and soak.poll() is None:
        if _server_pids(str(home)):
            break
        time.sleep(0.2)
    else:
        return False
    time.sleep(KILL_AFTER_S)
    pids = _server_pids(str(home))
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return bool(pids)


@contextlib.contextmanager
def soaked_influx(tmp: Path) -> Iterator[Soaked]:
    """The soak (and the upgrade) into a real InfluxDB, checked to have done what the
    queries need; the database stays up while the context is open."""
    # pdns_server's control socket lives in the run directory: a UNIX socket path has
    # at most 107 bytes, more than pytest's temp paths leave, so the runs go in a short one.
    with tempfile.TemporaryDirectory(prefix="soak-g-") as short, influxdb_v1(tmp) as influx:
        data_dir, home = Path(short) / "data", Path(short) / "home"
        data_dir.mkdir()
        make_pdns_db(data_dir)
        influx.create_database(DB)
        dead_url = f"http://127.0.0.1:{free_port()}"
        path = tmp / "scenario.yaml"
        path.write_text(yaml.safe_dump(scenario(data_dir, influx.url, dead_url)))
        start_ns = time.time_ns()
        soak = subprocess.Popen(
            [str(Path(sys.executable).parent / "soak"), "start", str(path), "--foreground",
             "--data-dir", str(home)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp,
        )  # fmt: skip
        try:
            killed = _kill_server_once(home, soak)
            output, _ = soak.communicate(timeout=RUN_TIMEOUT_S)
        finally:
            if soak.poll() is None:
                soak.kill()
                soak.wait()
        assert killed, output
        # 1: a criterion failed (the leak verdicts are meant to say growing).
        assert soak.returncode in (0, 1), output
        assert not _server_pids(str(home)), "the soak left its target running"
        upgrade = run_upgrade(Path(short), influx.url)
        assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
        m = re.search(r"^soak: run (\S+): starting", output, re.M)
        assert m, output
        yield Soaked(influx, m.group(1), start_ns, time.time_ns(), output, home)
