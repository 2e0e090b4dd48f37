"""A target on another node, sampled there by a sampler agent (`samplers.agent`): a real
unbound stands for it (the run treats it as external and has no PID for it; only the
agent, told its PID, reads its /proc). The agent's `process` and `memory_map` points
land in the run's store on the same tick grid as the run's own `load` points, local and
as a Docker Swarm service (the node's /proc mounted); an agent killed mid-run is an
`agent_lost` event; no swarm service is left."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from soak.clock import NS_PER_S
from tests.e2e.soakrun import last_json, soak_argv
from tests.e2e.test_soak_agents import events
from tests.support.agents import AGENT_IMAGE
from tests.support.procs import children, cmdline
from tests.support.servers import ServerProc, module_unbound
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e


server = module_unbound(threads=1)


def start(
    tmp_path: Path, server: ServerProc, engine: str, duration_s: int
) -> subprocess.Popen[str]:
    doc = {
        "name": "sampler-agent",
        "target": {
            "runtime": "external",
            "name": "unbound",
            "ports": {"dns": {"host": server.port, "protocol": "both"}},
        },
        "phases": [{"name": "steady", "duration_s": f"{duration_s}s"}],
        "samplers": {
            "interval_s": 1,
            "smaps": {"top_paths": 2},
            "agent": {"engine": engine, "image": AGENT_IMAGE, "pid": server.proc.pid, "lease_s": 3},
        },
        "load": {"rate_qps": 100, "mix": [{"name": "q", "queries": ["www.example.test A"]}]},
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    argv = soak_argv(
        "start", str(path), "--foreground", "--json", "--data-dir", str(tmp_path / "data")
    )
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def times(db: Path, measurement: str, field: str) -> list[int]:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.OperationalError:
        return []
    try:
        rows = con.execute(
            "SELECT DISTINCT v.time_ns FROM samples v JOIN series s ON s.id = v.series_id "
            "WHERE s.measurement = ? AND v.field = ? ORDER BY 1",
            (measurement, field),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()
    return [int(r[0]) for r in rows]


def assert_sampled_on_the_grid(tmp_path: Path, status: dict[str, Any]) -> None:
    db = tmp_path / "data" / "points.db"
    load_ticks = times(db, "load", "sent")
    proc_ticks = times(db, "process", "rss_anon_bytes")
    assert len(load_ticks) >= 8, load_ticks
    # The run's own grid (1-s ticks from a whole second), within the run's ticks (the
    # load's first tick may be empty: the load begins at the origin, as that tick does).
    assert all(t % NS_PER_S == 0 for t in proc_ticks), proc_ticks
    assert load_ticks[0] - NS_PER_S <= proc_ticks[0] and proc_ticks[-1] <= load_ticks[-1]
    assert len(proc_ticks) >= len(load_ticks) - 1, (proc_ticks, load_ticks)
    assert times(db, "memory_map", "rss_bytes"), "no smaps points from the agent"
    assert events(status, "sampler_error") == [], events(status, "sampler_error")
    assert events(status, "agent_lost") == []
    assert status["status"] in ("passed", "failed", "not_judged"), status["message"]


def test_a_local_sampler_agent_samples_the_target_on_the_runs_grid(
    server: ServerProc, tmp_path: Path
) -> None:
    proc = start(tmp_path, server, "local", 10)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode in (0, 1), err[-3000:]  # 1: a busy machine's generator fell behind
    status = last_json(out)
    assert_sampled_on_the_grid(tmp_path, status)


def test_a_sampler_agent_killed_is_an_event(server: ServerProc, tmp_path: Path) -> None:
    proc = start(tmp_path, server, "local", 20)
    try:
        db = tmp_path / "data" / "points.db"
        wait_for(lambda: len(times(db, "process", "fds")) >= 2, 60, "the agent's points")
        (agent,) = [c for c in children(proc.pid) if " sampler-agent " in cmdline(c)]
        os.kill(agent, signal.SIGKILL)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    status = last_json(out)
    (lost,) = events(status, "agent_lost")
    assert re.fullmatch(r"sampler agent on the target's node lost: .+", lost), lost
    assert status["status"] in ("passed", "failed", "not_judged"), err[-3000:]


@pytest.mark.docker
def test_a_swarm_sampler_agent_reads_the_nodes_proc(
    client: Any, server: ServerProc, swarm: None, tmp_path: Path
) -> None:
    before = {s.id for s in client.services.list()}
    proc = start(tmp_path, server, "swarm", 10)
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
        left = [s for s in client.services.list() if s.id not in before and "sampler" in s.name]
        for service in left:
            service.remove()
    assert left == [], [s.name for s in left]
    assert proc.returncode in (0, 1), err[-3000:]  # 1: a busy machine's generator fell behind
    status = last_json(out)
    assert_sampled_on_the_grid(tmp_path, status)
    (result,) = (tmp_path / "data" / "runs").glob("*/result.json")
    assert json.loads(result.read_text())["status"] in ("passed", "failed", "not_judged")
