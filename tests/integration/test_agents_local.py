"""The `local` agents engine: `soak agent` processes on this machine against a real unbound."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from soak.agents.local import LocalEngine
from soak.cli import main
from soak.load.load_config import LoadConfig
from soak.plans.load import AgentsRun, run_load_agents
from soak.runs.layout import AgentFiles
from tests.support.agents import agents_scenario
from tests.support.procs import children, cmdline
from tests.support.servers import ServerProc, module_unbound
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


server = module_unbound(threads=1)


def test_soak_load_with_local_agents(
    server: ServerProc, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "q.txt").write_text("www.example.test A\nmail.example.test A\n")
    load = {
        "rate_qps": 301,
        "duration_s": 3,
        "flows": 4,
        "mix": [
            {"name": "file", "weight": 2, "file": "q.txt"},
            {"name": "miss", "random": {"zone": "example.test"}},
        ],
        "agents": {"count": 2, "engine": "local"},
    }
    path = agents_scenario(tmp_path, "agents-local", server.port, load)
    argv = ["load", "--server", f"127.0.0.1:{server.port}", "--scenario", str(path), "--json"]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    assert exc.value.code == 0, out.err
    result = json.loads(out.out)
    assert result["agents"] == 2
    assert [a["rate_target_qps"] for a in result["per_agent"]] == [150.5, 150.5]
    assert abs(result["sent"] - 903) <= 9
    assert result["sent"] == result["completed"] + result["lost"] + result["abandoned"]
    assert result["accounting_errors"] == [] and result["notes"] == []
    assert [s["state"] for s in result["states"]] == ["complete", "complete"]
    assert result["latency_ms"]["p99"] is not None


def _two_agents(rate_qps: int, duration_s: float) -> LoadConfig:
    return LoadConfig.model_validate(
        {
            "rate_qps": rate_qps,
            "duration_s": duration_s,
            "flows": 2,
            "mix": [{"name": "local", "queries": ["www.example.test A"]}],
            "agents": {"count": 2, "engine": "local", "lease_s": 3},
        }
    )


def test_an_agent_killed_is_lost_and_the_other_finishes(server: ServerProc, tmp_path: Path) -> None:
    engine = LocalEngine(AgentFiles(tmp_path / "agents"))
    done: dict[str, Any] = {}
    worker = threading.Thread(
        target=lambda: done.setdefault(
            "run",
            run_load_agents(
                _two_agents(200, 8),
                ("127.0.0.1", server.port),
                8,
                base_dir=tmp_path,
                engine=engine,
            ),
        )
    )
    worker.start()
    try:
        # Both registered and released: their workers are up (started before start_at).
        wait_for(
            lambda: len(engine._procs) == 2 and all(children(p.pid) for p in engine._procs),
            60,
            "two agents' workers",
            0.1,
        )
        engine._procs[1].kill()  # as the kernel's OOM killer would
    finally:
        worker.join(60)
    run: AgentsRun = done["run"]
    assert [s.state for s in run.states] == ["complete", "failed"]
    assert len(run.notes) == 1 and run.notes[0].startswith("agent 1 of 2 lost at +0:00:")
    assert [a.agent for a in run.merged.agents] == [0]
    assert abs(run.merged.sent - 100 * 8) <= 8  # agent 0's share, whole
    assert run.windows[0] == {
        "sent": run.merged.agents[0].sent,
        "completed": run.merged.agents[0].completed,
        "lost": run.merged.agents[0].lost,
    }
    assert all(p.poll() is not None for p in engine._procs)


def test_soak_load_killed_leaves_no_agent_past_its_lease(
    server: ServerProc, tmp_path: Path
) -> None:
    """SIGKILL to `soak load`: nobody removes its agents, they stop when the lease runs out."""
    load = {**_two_agents(50, 120).model_dump(mode="json", exclude_none=True)}
    path = agents_scenario(tmp_path, "agents-killed", server.port, load)
    argv = [sys.executable, "-m", "soak.cli", "load", "--server", f"127.0.0.1:{server.port}"]
    proc = subprocess.Popen([*argv, "--scenario", str(path)], stderr=subprocess.PIPE)
    try:

        def agents() -> list[int]:
            return [pid for pid in children(proc.pid) if " agent " in cmdline(pid)]

        pids = wait_for(lambda: len(agents()) == 2 and agents(), 60, "two agents", 0.1)
        # Sending: the coordinator released them and their workers are up.
        wait_for(lambda: all(children(pid) for pid in pids), 60, "the agents' workers", 0.1)
        proc.kill()
        proc.wait()
        # The lease (3 s) and a margin; a process gone has no command line (nor a zombie).
        wait_for(lambda: not any(cmdline(pid) for pid in pids), 3 + 15, "the agents gone", 0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
