"""Load agents as Docker Swarm services against a real unbound on loopback.

Needs a Docker engine and the agent image (`make agent-image`). A machine that
is not in a swarm is made a one-node swarm for these tests and left again at
the end (with the docker_gwbridge network that `swarm leave` leaves behind);
a machine already in a swarm is left as it was. Every test checks that the
run's services are gone afterwards, also when it fails.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from soak.agents.swarm import SwarmEngine
from soak.errors import InputError
from soak.histogram import LatencyHistogram
from soak.labels import LABEL_OWNER, LABEL_RUN
from soak.load.load_config import LoadConfig
from soak.plans.load import run_load_agents
from soak.procfs import start_ticks
from soak.runs.runid import new_run_id
from tests.support.agents import AGENT_IMAGE, agents_scenario
from tests.support.servers import ServerProc, module_unbound
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.docker]

RATE_QPS = 600
DURATION_S = 8.0


server = module_unbound(threads=2)


@pytest.fixture
def run_id(client: Any, swarm: None) -> Iterator[str]:
    rid = new_run_id("t")  # the engine's format: a standalone load's directory is named by it
    try:
        yield rid
    finally:
        left = client.services.list(filters={"label": f"{LABEL_RUN}={rid}"})
        for service in left:  # never leave them, but fail the test that did
            service.remove()
        assert left == [], f"services left behind: {[s.name for s in left]}"


def _cfg(image: str = AGENT_IMAGE) -> LoadConfig:
    return LoadConfig.model_validate(
        {
            "rate_qps": RATE_QPS,
            "flows": 12,
            "timeout_s": 2,
            "seed": 11,
            "mix": [
                {"name": "local", "weight": 3, "queries": ["www.example.test A"]},
                {"name": "miss", "random": {"zone": "example.test"}},
            ],
            "agents": {"count": 3, "engine": "swarm", "image": image},
        }
    )


def test_three_swarm_agents_reach_the_asked_total(
    client: Any, server: ServerProc, run_id: str, tmp_path: Path
) -> None:
    run = run_load_agents(
        _cfg(),
        ("127.0.0.1", server.port),
        DURATION_S,
        base_dir=tmp_path,
        run_id=run_id,
        engine=SwarmEngine(client),
    )
    assert [s.state for s in run.states] == ["complete"] * 3, run.states
    assert run.notes == []
    merged = run.merged
    asked = RATE_QPS * DURATION_S
    assert abs(merged.sent - asked) <= 0.01 * asked, merged.sent
    assert [a.agent for a in merged.agents] == [0, 1, 2]
    assert [a.rate_target_qps for a in merged.agents] == [200.0, 200.0, 200.0]
    for a in merged.agents:
        assert a.sent == a.completed + a.lost + a.abandoned
    assert merged.sent == merged.completed + merged.lost + merged.abandoned
    assert merged.completed >= 0.95 * merged.sent
    assert merged.rcodes.keys() == {"NOERROR", "NXDOMAIN"}
    # The merged histogram is the agents' histograms added, and its p99 is theirs combined.
    combined = LatencyHistogram()
    for a in merged.agents:
        combined.add(a.hist)
    assert merged.hist.total == merged.completed
    assert merged.hist.quantile_ms(0.99) == combined.quantile_ms(0.99)
    # Every agent's seconds, as the coordinator merged them, add up to its own totals.
    assert run.windows == {
        a.agent: {"sent": a.sent, "completed": a.completed, "lost": a.lost} for a in merged.agents
    }


def test_missing_image_starts_nothing(
    client: Any, server: ServerProc, run_id: str, tmp_path: Path
) -> None:
    with pytest.raises(InputError, match="is not on this node"):
        run_load_agents(
            _cfg("soak/agent:no-such-tag"),
            ("127.0.0.1", server.port),
            DURATION_S,
            base_dir=tmp_path,
            run_id=run_id,
            engine=SwarmEngine(client),
        )
    assert client.services.list(filters={"label": f"{LABEL_RUN}={run_id}"}) == []


@contextmanager
def _swarm_load(
    client: Any, server: ServerProc, tmp_path: Path, name: str, count: int, *flags: str, **load: Any
) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, str]]]:
    """`soak load` in a subprocess with `count` swarm agents; (the process, the label filter of
    its services). Afterwards the process is gone and so are its services."""
    agents = {"count": count, "engine": "swarm", "image": AGENT_IMAGE}
    load = {**_cfg().model_dump(mode="json", exclude_none=True), **load, "agents": agents}
    path = agents_scenario(tmp_path, name, server.port, load)
    argv = [sys.executable, "-m", "soak.cli", "load", "--server", f"127.0.0.1:{server.port}"]
    proc = subprocess.Popen(
        [*argv, "--scenario", str(path), *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    owner = {"label": f"{LABEL_OWNER}={socket.gethostname()}:{proc.pid}:{start_ticks(proc.pid)}"}
    try:
        yield proc, owner
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for service in client.services.list(filters=owner):
            service.remove()


def test_sigterm_removes_the_services(
    client: Any, server: ServerProc, swarm: None, tmp_path: Path
) -> None:
    load = _swarm_load(client, server, tmp_path, "agents-stop", 2, rate_qps=60, duration_s=60)
    with load as (proc, owner):

        def running() -> bool:
            services = client.services.list(filters=owner)
            return len(services) == 2 and all(
                any(t["Status"]["State"] == "running" for t in s.tasks()) for s in services
            )

        wait_for(lambda: running() or proc.poll() is not None, 120, "two running agents", 0.2)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert err.decode().strip().splitlines() == [
            "soak: stopped by SIGTERM; the agents were removed"
        ]
        assert client.services.list(filters=owner) == []


def test_an_agent_killed_is_reported_and_the_others_finish(
    client: Any, server: ServerProc, swarm: None, tmp_path: Path
) -> None:
    with _swarm_load(
        client, server, tmp_path, "agents-fault", 3, "--json", rate_qps=300, duration_s=10
    ) as (proc, owner):

        def agent_1_container() -> Any:
            for service in client.services.list(filters=owner):
                if service.name.endswith("-1"):
                    name = {"label": f"com.docker.swarm.service.name={service.name}"}
                    running = client.containers.list(filters=name, ignore_removed=True)
                    return running[0] if running else None
            return None

        def agent_1_sending() -> Any:
            # Registered and released: its workers (started before start_at) are up.
            found = agent_1_container()
            return found if found and len(found.top()["Processes"]) > 1 else None

        container = wait_for(agent_1_sending, 120, "agent 1's workers", 0.2)
        seen = container.top()["Processes"]
        container.kill()
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, (err, seen)
        result = json.loads(out)
        assert [s["state"] for s in result["states"]] == ["complete", "failed", "complete"]
        assert "agent 1 of 3 lost at +0:00:" in " ".join(result["notes"])
        assert [a["agent"] for a in result["per_agent"]] == [0, 2]
        assert result["sent"] == sum(a["sent"] for a in result["per_agent"])
        assert abs(result["sent"] - 2 * 100 * 10) <= 20
        assert err.decode().strip().splitlines()[-1].startswith("soak: agent 1 of 3 lost at")
        assert client.services.list(filters=owner) == []
