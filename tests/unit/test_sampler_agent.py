"""The sampler agent of a target on another node: its config, its spec on each engine,
the coordinator's inbox, and the agent's loop on the run's tick grid (fake clocks, a
fake coordinator client, the real proc sampler on this process)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from soak.agents.kube import build_job
from soak.agents.protocol import SAMPLES, Clocks, CoordinatorUnreachable, LeaseLost, SamplesReply
from soak.agents.swarm import service_kwargs
from soak.clock import NS_PER_S
from soak.errors import InputError
from soak.points import Point
from soak.preflight import check_sampler_agent
from soak.samplers.member import NodeTarget, node_samplers, run_sampler_agent
from soak.samplers.remote_samplers import SamplerInbox, sampler_spec
from soak.samplers.selection import SamplerAgentConfig, SamplersConfig
from tests.unit.test_bad_input import base_scenario

S = NS_PER_S


def samplers_cfg(**agent: Any) -> SamplersConfig:
    return SamplersConfig.model_validate({"interval_s": 2, "agent": {"pid": 1, **agent}})


@pytest.mark.parametrize(
    "agent",
    [{}, {"pid": 1, "container": "dns"}, {"pidfile": "/run/x.pid", "container": "dns"}],
)
def test_exactly_one_way_to_find_the_process(agent: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="exactly one of pid, pidfile, container"):
        SamplerAgentConfig.model_validate(agent)


def test_a_swarm_sampler_agent_sees_the_nodes_proc_and_may_read_it() -> None:
    spec = sampler_spec(samplers_cfg(engine="swarm"), "dns", "r-1", "http://127.0.0.1:9", "t")
    kwargs = service_kwargs(spec, 0)
    assert kwargs["name"] == "soak-sampler-r-1-0"
    assert kwargs["labels"]["soak.role"] == "sampler"
    assert kwargs["args"] == [
        "sampler-agent", "--proc-root", "/host/proc", "--node-fs", "/host/proc/1/root",
        "--coordinator", "http://127.0.0.1:9",
    ]  # fmt: skip
    assert "/proc:/host/proc:ro" in kwargs["mounts"]
    assert kwargs["user"] == "0" and kwargs["cap_add"] == ["CAP_SYS_PTRACE"]
    env = dict(e.split("=", 1) for e in kwargs["env"])
    assert env["SOAK_AGENT_TOKEN"] == "t" and env["SOAK_SAMPLER_TARGET"] == "dns"
    assert SamplersConfig.model_validate_json(env["SOAK_SAMPLERS"]).agent is not None


def test_a_kubernetes_sampler_agent_runs_in_the_nodes_pid_namespace() -> None:
    cfg = samplers_cfg(engine="kubernetes", placement=["node.hostname==dns1"])
    job = build_job(sampler_spec(cfg, "dns", "r-1", "http://10.0.0.1:9", "t"))
    pod = job.spec.template.spec
    assert pod.host_pid is True
    assert pod.node_selector == {"kubernetes.io/hostname": "dns1"}
    assert pod.containers[0].args[:3] == ["sampler-agent", "--proc-root", "/proc"]
    assert job.metadata.name == "soak-sampler-r-1"


def test_only_a_target_on_another_node_gets_a_sampler_agent() -> None:
    from soak.config import Scenario

    data = base_scenario()
    data["samplers"] = {"agent": {"engine": "local", "pid": 1}}
    with pytest.raises(InputError, match="only for a target on another node"):
        check_sampler_agent(Scenario.model_validate(data))


def test_the_inbox_hands_on_what_came_and_knows_when_it_last_heard() -> None:
    now = [0.0]
    inbox = SamplerInbox(2.0, 5.0, clock=lambda: now[0])
    assert inbox.silent_s() == 0.0  # not called yet: not silent
    reply = SamplesReply.from_json_dict(inbox.call(SAMPLES, {"agent": 0, "points": []}))
    assert reply.origin_ns is None and not reply.stop
    inbox.origin_ns = 7 * S
    point = {"measurement": "process", "tags": {}, "fields": {"fds": 9.0}, "time_ns": 9 * S}
    now[0] = 3.0
    reply = SamplesReply.from_json_dict(inbox.call(SAMPLES, {"agent": 0, "points": [point]}))
    assert reply.origin_ns == 7 * S and reply.interval_s == 2.0
    assert inbox.take() == [Point("process", {"fds": 9.0}, 9 * S, {})]
    assert inbox.take() == []
    now[0] = 10.0
    assert inbox.silent_s() == 7.0
    with pytest.raises(LookupError):
        inbox.call("/v1/heartbeat", {"agent": 0})


class FakeClient:
    """The coordinator as the agent sees it: a grid from the second call, stop after
    `stop_after` calls with points; `down` calls fail."""

    def __init__(
        self, origin_ns: int, stop_after: int, down: set[int] | None = None, interval_s: float = 2
    ) -> None:
        self.origin_ns, self.stop_after, self.down = origin_ns, stop_after, down or set()
        self.interval_s = interval_s
        self.calls: list[list[dict[str, Any]]] = []

    def samples(self, points: list[dict[str, Any]]) -> SamplesReply:
        self.calls.append(list(points))
        if len(self.calls) in self.down:
            raise CoordinatorUnreachable("down")
        sent = sum(1 for c in self.calls if c)
        origin = self.origin_ns if len(self.calls) > 1 else None
        return SamplesReply(origin, self.interval_s, 5.0, stop=sent >= self.stop_after)


class FakeClocks(Clocks):
    def __init__(self, wall_ns: int) -> None:
        self.now_ns = wall_ns
        super().__init__(
            monotonic=lambda: self.now_ns / S,
            wall_ns=lambda: self.now_ns,
            sleep=lambda s: setattr(self, "now_ns", self.now_ns + round(s * S)),
        )


def test_the_agent_samples_on_the_runs_grid_and_resends_what_did_not_get_through() -> None:
    """This process stands for the target: real /proc reads, ticks at origin + k * 2 s."""
    cfg = samplers_cfg(pid=os.getpid())
    assert cfg.agent is not None
    target = NodeTarget(cfg.agent, "me", Path("/proc"))
    client = FakeClient(origin_ns=100 * S, stop_after=3, down={3})
    clocks = FakeClocks(wall_ns=100 * S + S // 3)
    ticks = run_sampler_agent(
        node_samplers(cfg, target, Path("/proc")),
        client,
        clocks=clocks,  # type: ignore[arg-type]
    )
    assert ticks == 2
    with_points = [c for c in client.calls if c]
    # The first tick's call failed: its points went again with the next call, a heartbeat
    # between ticks (2 s apart, the lease 5 s: the agent calls at least every 5/3 s).
    times = [[p["time_ns"] for p in call] for call in with_points]
    assert times == [[102 * S], [102 * S], [104 * S]]
    assert [len(c) for c in client.calls] == [0, 0, 1, 1, 1]  # register, grid, ...
    assert all(p["measurement"] == "process" and p["fields"]["fds"] > 0 for p in with_points[0])


def test_the_agent_stops_by_itself_when_the_coordinator_is_gone_a_lease() -> None:
    cfg = samplers_cfg(pid=os.getpid())
    assert cfg.agent is not None
    client = FakeClient(origin_ns=100 * S, stop_after=99, down=set(range(3, 99)))
    clocks = FakeClocks(wall_ns=100 * S)
    with pytest.raises(LeaseLost, match="no answer from the coordinator"):
        run_sampler_agent(
            node_samplers(cfg, NodeTarget(cfg.agent, "me", Path("/proc")), Path("/proc")),
            client,  # type: ignore[arg-type]
            clocks=clocks,
        )
    assert clocks.now_ns < 110 * S  # a 5-s lease: stopped within a few ticks of 2 s


def test_between_ticks_longer_than_the_lease_the_agent_still_calls() -> None:
    """60-s ticks, a 5-s lease: calls at most 5/3 s apart, so neither side times out."""
    cfg = samplers_cfg(pid=os.getpid())
    assert cfg.agent is not None
    client = FakeClient(origin_ns=100 * S, stop_after=2, interval_s=60)
    clocks = FakeClocks(wall_ns=100 * S + S // 3)
    called_at: list[int] = []
    samples = client.samples

    def timed(points: list[dict[str, Any]]) -> SamplesReply:
        called_at.append(clocks.now_ns)
        return samples(points)

    client.samples = timed  # type: ignore[method-assign]
    target = NodeTarget(cfg.agent, "me", Path("/proc"))
    ticks = run_sampler_agent(
        node_samplers(cfg, target, Path("/proc")),
        client,
        clocks=clocks,  # type: ignore[arg-type]
    )
    assert ticks == 2  # at 160 s and 220 s
    gaps_s = [(b - a) / S for a, b in itertools.pairwise(called_at)]
    assert max(gaps_s) <= 5 / 3 + 1e-6, gaps_s
    assert len(called_at) > 60
