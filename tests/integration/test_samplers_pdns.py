"""Samplers against a real pdns-server: /proc, /metrics, its HTTP API, DNS and its database."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from soak.clock import NS_PER_S
from soak.points import Point
from soak.samplers import TickRunner, build_samplers
from soak.samplers.proc import ProcSampler
from soak.samplers.selection import (
    DigProbeConfig,
    FilesSamplerConfig,
    HttpCallConfig,
    PromSamplerConfig,
    RowCountConfig,
    SamplersConfig,
)
from soak.targets.base import Running
from tests.support.pdns import PDNS_API_KEY, pdns_server
from tests.support.servers import ServerProc

pytestmark = pytest.mark.integration

S = NS_PER_S
RUN = {"soak": "it", "scenario": "samplers", "target": "pdns", "version": "4.7"}
ZONE = {
    "name": "example.test.",
    "kind": "Native",
    "nameservers": [],
    "rrsets": [
        {
            "name": "www.example.test.",
            "type": "A",
            "ttl": 60,
            "records": [{"content": "192.0.2.10", "disabled": False}],
        }
    ],
}


@pytest.fixture(scope="module")
def pdns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    with pdns_server(tmp_path_factory.mktemp("pdns")) as server:
        r = httpx.post(
            f"http://127.0.0.1:{server.extra_ports['web']}/api/v1/servers/localhost/zones",
            headers={"X-API-Key": PDNS_API_KEY},
            json=ZONE,
            timeout=10,
        )
        assert r.status_code == 201, r.text
        yield server


def as_running(server: ServerProc) -> Running:
    ports = {"dns": server.port, "web": server.extra_ports["web"]}
    return Running("pdns", "127.0.0.1", ports, server.pid, server.log_path, data_dir=server.workdir)


def status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def test_proc_agrees_with_proc_read_independently(pdns: ServerProc) -> None:
    sampler = ProcSampler(lambda: as_running(pdns))
    fds_before = len(os.listdir(f"/proc/{pdns.pid}/fd"))
    (point,) = sampler.sample(S)
    rss_kib, fds = status_kib(pdns.pid, "VmRSS"), len(os.listdir(f"/proc/{pdns.pid}/fd"))
    f = point.fields
    assert f["rss_bytes"] > 0 and f["fds"] > 0
    assert abs(float(f["rss_bytes"]) / 1024 - rss_kib) <= 0.05 * rss_kib
    assert min(fds, fds_before) - 2 <= float(f["fds"]) <= max(fds, fds_before) + 2
    assert f["rss_anon_bytes"] > 0 and f["rss_file_bytes"] > 0
    assert float(f["rss_anon_bytes"]) + float(f["rss_file_bytes"]) <= float(f["rss_bytes"]) * 1.05
    assert 0 < float(f["pss_bytes"]) <= float(f["rss_bytes"]) * 1.05
    assert f["threads"] == status_kib(pdns.pid, "Threads")
    soft = int(
        subprocess.run(
            ["prlimit", "--nofile", "--output=SOFT", "--noheadings", f"--pid={pdns.pid}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert f["fd_limit"] == soft
    time.sleep(0.2)
    (again,) = sampler.sample(2 * S)
    assert 0.0 <= float(again.fields["cpu_cores"]) < 2.5  # two cores here


def test_process_tree_sums_the_children(tmp_path: Path) -> None:
    parent = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(children(parent.pid)) < 2:
            time.sleep(0.05)
        target = Running("sh", "127.0.0.1", {}, parent.pid, None)
        (tree,) = ProcSampler(lambda: target, tree=True).sample(S)
        (alone,) = ProcSampler(lambda: target).sample(S)
    finally:
        parent.kill()
        parent.wait()
        for pid in children(parent.pid):
            os.kill(pid, 9)
    assert tree.fields["processes"] == 3
    assert float(tree.fields["rss_bytes"]) > float(alone.fields["rss_bytes"])
    assert "processes" not in alone.fields


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def one_tick(cfg: SamplersConfig, pdns: ServerProc, tick_ns: int = 60 * S) -> list[Point]:
    runner = TickRunner(build_samplers(cfg, lambda: as_running(pdns)), run_tags=RUN)
    try:
        return runner.run_tick(tick_ns)
    finally:
        runner.close()


def test_prom_maps_pdns_metrics(pdns: ServerProc) -> None:
    cfg = SamplersConfig(
        proc={"enabled": False},
        prom=PromSamplerConfig(
            port="web",
            map={
                "real_memory_bytes": "pdns_auth_real_memory_usage",
                "udp_queries": "pdns_auth_udp_queries",
                "fd_usage": "max(pdns_auth_fd_usage)",
                "nothing": "no_such_metric",
            },
        ),
    )
    points = one_tick(cfg, pdns)
    (runtime,) = [p for p in points if p.measurement == "runtime"]
    (missing,) = [p for p in points if p.measurement == "event"]
    assert float(runtime.fields["real_memory_bytes"]) > 1024**2
    assert float(runtime.fields["fd_usage"]) > 0
    assert missing.tags["kind"] == "prom_missing" and "nothing" in str(missing.fields["message"])
    before = float(runtime.fields["udp_queries"])
    dig = SamplersConfig(proc={"enabled": False}, dig=[DigProbeConfig(name="www.example.test")])
    one_tick(dig, pdns)
    (after,) = [p for p in one_tick(cfg, pdns) if p.measurement == "runtime"]
    assert float(after.fields["udp_queries"]) >= before + 1


def test_http_sampler_times_the_pdns_api(pdns: ServerProc, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOAK_TEST_PDNS_KEY", PDNS_API_KEY)
    monkeypatch.setenv("SOAK_TEST_WRONG_KEY", "wrong")
    cfg = SamplersConfig(
        proc={"enabled": False},
        http=[
            HttpCallConfig(
                path="/api/v1/servers/localhost/zones",
                port="web",
                token_env="SOAK_TEST_PDNS_KEY",
                token_header="X-API-Key",
            ),
            HttpCallConfig(
                endpoint="zones with a wrong key",
                path="/api/v1/servers/localhost/zones",
                port="web",
                token_env="SOAK_TEST_WRONG_KEY",
                token_header="X-API-Key",
            ),
        ],
    )
    points = {p.tags["endpoint"]: p for p in one_tick(cfg, pdns) if p.measurement == "api"}
    good = points["GET /api/v1/servers/localhost/zones"].fields
    assert good["status"] == 200.0 and good["ok"] == 1.0
    assert float(good["bytes"]) > 20 and float(good["latency_ms"]) > 0
    bad = points["zones with a wrong key"].fields
    assert bad["status"] == 401.0 and bad["ok"] == 0.0


def test_dig_sampler_against_pdns(pdns: ServerProc) -> None:
    cfg = SamplersConfig(
        proc={"enabled": False},
        dig=[
            DigProbeConfig(name="www.example.test", answer="192.0.2.10"),
            DigProbeConfig(name="www.example.test", answer="192.0.2.99", protocol="tcp"),
            DigProbeConfig(name="nope.example.test", rcode="NXDOMAIN"),
            DigProbeConfig(name="www.elsewhere.test", rcode="NOERROR"),
        ],
    )
    points = [p for p in one_tick(cfg, pdns) if p.measurement == "dig"]
    got = [(p.tags["probe"], p.fields["rcode"], p.fields["ok"]) for p in points]
    assert got == [
        ("www.example.test/A", 0.0, 1.0),
        ("www.example.test/A", 0.0, 0.0),  # answered, but not the expected address
        ("nope.example.test/A", 3.0, 1.0),
        ("www.elsewhere.test/A", 5.0, 0.0),  # REFUSED: not a zone it serves
    ]
    assert all(float(p.fields["latency_ms"]) > 0 for p in points)


def test_files_sampler_reads_the_pdns_database(pdns: ServerProc) -> None:
    cfg = SamplersConfig(
        proc={"enabled": False},
        files=FilesSamplerConfig(
            paths=["pdns.sqlite3", "pdns.sqlite3-wal", "*.conf"],
            row_counts=[RowCountConfig(path="pdns.sqlite3", query="SELECT count(*) FROM records")],
        ),
    )
    points = [p for p in one_tick(cfg, pdns) if p.measurement == "files"]
    by_path = {(p.tags["path"], k): v for p in points for k, v in p.fields.items()}
    db = pdns.workdir / "pdns.sqlite3"
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT count(*) FROM records").fetchone()[0]
    assert rows >= 2  # the SOA and www
    assert by_path[("pdns.sqlite3", "rows")] == rows
    assert by_path[("pdns.sqlite3", "bytes")] == db.stat().st_size
    assert by_path[("pdns.conf", "bytes")] == (pdns.workdir / "pdns.conf").stat().st_size


def test_a_full_tick_and_a_stopped_target(pdns: ServerProc) -> None:
    cfg = SamplersConfig(
        prom=PromSamplerConfig(port="web", map={"uptime_s": "pdns_auth_uptime"}),
        http=[HttpCallConfig(path="/metrics", port="web")],
        dig=[DigProbeConfig(name="www.example.test")],
        files=FilesSamplerConfig(paths=["pdns.sqlite3"]),
    )
    points = one_tick(cfg, pdns, 120 * S)
    # host: the machine's own load, on by default beside every latency
    measurements = {"process", "runtime", "api", "dig", "files", "host"}
    assert {p.measurement for p in points} == measurements
    assert all(p.time_ns == 120 * S and p.tags["soak"] == "it" for p in points)
    runner = TickRunner(build_samplers(cfg, lambda: None), run_tags=RUN)
    stopped = runner.run_tick(180 * S)
    runner.close()
    # the target's samplers give one event; the machine is sampled whatever the target does
    (event,) = [p for p in stopped if p.measurement != "host"]
    assert event.tags["kind"] == "target_not_running" and event.time_ns == 180 * S
    assert {p.measurement for p in stopped} == {"event", "host"}
