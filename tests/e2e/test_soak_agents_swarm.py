"""A soak whose load comes from three Docker Swarm agents (the agent image, host
networking) against a real unbound on loopback: the agents register with the run's
coordinator, their seconds are merged into the run's store and reach the asked total;
one agent's container killed is an `agent_lost` event and the verdict says the run was
generator-bound; the soak SIGKILLed leaves no agent container running past the lease.
Every test checks that no service of its run is left (and removes any, failing)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soak.agents.spec import ROLE
from soak.agents.swarm import SwarmEngine
from soak.labels import LABEL_ROLE, LABEL_RUN
from tests.e2e.soakrun import last_json, soak_argv
from tests.e2e.test_soak_agents import agent_sums, assert_one_of_three_lost, sums
from tests.support.agents import AGENT_IMAGE, agents_scenario, hit_miss_mix
from tests.support.ledger import assert_figures_agree
from tests.support.servers import ServerProc, module_unbound
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

RATE_QPS = 600
LEASE_S = 3


server = module_unbound(threads=2)


NAME = "swarm-agents"  # the scenario's: its runs' ids, and so their services' names, start so


def agent_services(client: Any) -> list[Any]:
    """The agent services of this module's runs (not those of anything else on the swarm)."""
    found = client.services.list(filters={"label": f"{LABEL_ROLE}={ROLE}"})
    return [s for s in found if s.name.startswith(f"soak-agent-{NAME}-")]


@pytest.fixture
def no_services_left(client: Any, swarm: None) -> Iterator[None]:
    """The test's agents' services are gone at its end; any left are removed and fail it."""
    before = {s.id for s in agent_services(client)}
    yield
    left = [s for s in agent_services(client) if s.id not in before]
    for service in left:
        service.remove()
    assert left == [], f"services left behind: {[s.name for s in left]}"


def start(tmp_path: Path, port: int, duration_s: int) -> subprocess.Popen[str]:
    load = {
        "rate_qps": RATE_QPS,
        "seed": 5,
        "mix": hit_miss_mix(),
        "agents": {"count": 3, "engine": "swarm", "image": AGENT_IMAGE, "lease_s": LEASE_S},
    }
    samplers = {"interval_s": 1}
    path = agents_scenario(tmp_path, NAME, port, load, duration_s=duration_s, samplers=samplers)
    argv = soak_argv(
        "start", str(path), "--foreground", "--json", "--data-dir", str(tmp_path / "data")
    )
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def running_containers(client: Any) -> dict[int, Any]:
    """segment index -> the running agent containers (the index from the service's name)."""
    out = {}
    for c in client.containers.list(filters={"label": f"{LABEL_ROLE}={ROLE}"}, ignore_removed=True):
        name = c.labels.get("com.docker.swarm.service.name", "")
        found = re.fullmatch(rf"soak-agent-{NAME}-.+-(\d+)", name)
        if found:
            out[int(found.group(1))] = c
    return out


def test_three_swarm_agents_reach_the_asked_total(
    client: Any, server: ServerProc, tmp_path: Path, no_services_left: None
) -> None:
    duration_s = 12
    proc = start(tmp_path, server.port, duration_s)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    status = last_json(out)
    assert status["status"] == "passed", status["message"]
    db = tmp_path / "data" / "points.db"
    per_agent = agent_sums(db)
    total = sums(db)["total"]
    assert sorted(per_agent) == ["0", "1", "2"]
    assert sum(per_agent.values()) == total
    asked = RATE_QPS * duration_s
    assert total == asked, (total, asked)  # the agents' schedules interleave: exactly R x D
    for sent in per_agent.values():  # 200 q/s each
        assert abs(sent - asked / 3) <= 0.01 * asked, per_agent
    (result_path,) = (tmp_path / "data" / "runs").glob("*/result.json")
    totals = json.loads(result_path.read_text())["load_totals"]
    assert totals["agents_lost"] == 0
    for row in totals["agents"]:
        assert row["sent"] == row["completed"] + row["lost"], row  # nothing abandoned here
    ledger = assert_figures_agree(tmp_path / "data", status["id"])
    assert ledger["due"] == asked


def test_a_killed_agent_container_is_an_event_and_the_verdict_says_so(
    client: Any, server: ServerProc, tmp_path: Path, no_services_left: None
) -> None:
    proc = start(tmp_path, server.port, 24)
    try:
        db = tmp_path / "data" / "points.db"
        wait_for(lambda: agent_sums(db).get("2", 0) > 0, 120, "agent 2's points")
        containers = wait_for(lambda: running_containers(client).get(2), 30, "agent 2 running")
        containers.kill()
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err[-3000:]
    assert_one_of_three_lost(last_json(out), 2, tmp_path / "data")


def test_a_sigkilled_soak_leaves_no_agent_running_past_the_lease(
    client: Any, server: ServerProc, tmp_path: Path, no_services_left: None
) -> None:
    proc = start(tmp_path, server.port, 120)
    try:
        db = tmp_path / "data" / "points.db"
        wait_for(lambda: agent_sums(db).get("2", 0) > 0, 120, "the agents' points")
        assert len(running_containers(client)) == 3
        (run_id,) = {s.attrs["Spec"]["Labels"][LABEL_RUN] for s in agent_services(client)}
    finally:
        proc.kill()  # SIGKILL: no chance to tell the agents or remove their services
        proc.communicate(timeout=30)
    # Each agent stops by itself once it has gone a lease without an answer.
    wait_for(
        lambda: not running_containers(client), LEASE_S + 30, "every agent container has stopped"
    )
    # No one was left to remove the services: the next soak command's sweep of dead runs
    # does (soak.runs.leftovers). Another test's soak command beside this one may already
    # have swept them (the sweep is every soak command's, and the run is dead).
    SwarmEngine().sweep(run_id)
    assert agent_services(client) == []
