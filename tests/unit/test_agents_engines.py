"""Agents engines: the spec, the swarm services' arguments, the Kubernetes Job, the coordinator.

No cluster runs here: the Kubernetes objects are checked against the client's own
models, and the engine's API calls against a fake of BatchV1Api / CoreV1Api.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from docker.errors import ImageNotFound
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from soak.agents.engine import AgentState
from soak.agents.kube import KubernetesEngine, build_job, node_selector
from soak.agents.spec import ENGINE_ID_MAX_CHARS, AgentSpec, engine_id, object_name
from soak.agents.swarm import SwarmEngine, service_kwargs, task_state
from soak.errors import InputError
from soak.load.fleet.agent import LOAD_ENV
from soak.load.fleet.launch import build_spec
from soak.load.load_config import LoadConfig
from soak.runs.runid import new_run_id, run_id_tail
from soak.targets.cleanup import is_stale


def _cfg(engine: str = "swarm", count: int = 3, **agents: Any) -> LoadConfig:
    return LoadConfig.model_validate(
        {
            "rate_qps": 600,
            "seed": 5,
            "mix": [{"name": "local", "queries": ["www.example.test A"]}],
            "agents": {"count": count, "engine": engine, "image": "soak/agent:t", **agents},
        }
    )


def _spec(engine: str = "swarm", count: int = 3, **agents: Any) -> AgentSpec:
    cfg = _cfg(engine, count, **agents)
    return build_spec(cfg, "127.0.0.1:5300", 8.0, "r1", base_dir=Path("."), tags={"soak": "r1"})


def test_spec_inlines_files_for_engines_and_keeps_paths_locally(tmp_path: Path) -> None:
    (tmp_path / "q.txt").write_text("www.example.test A\n# c\nexample.test MX\n")
    data = {"rate_qps": 10, "mix": [{"name": "f", "file": "q.txt"}], "agents": {"count": 2}}
    local = build_spec(LoadConfig.model_validate(data), "127.0.0.1:53", 1, "r", base_dir=tmp_path)
    assert json.loads(local.extra_env[LOAD_ENV])["mix"][0]["file"] == str(tmp_path / "q.txt")
    data["agents"] = {"count": 2, "engine": "swarm"}
    swarm = build_spec(LoadConfig.model_validate(data), "127.0.0.1:53", 1, "r", base_dir=tmp_path)
    mix = json.loads(swarm.extra_env[LOAD_ENV])["mix"][0]
    assert mix["file"] is None and mix["queries"] == ["www.example.test A", "example.test MX"]
    assert json.loads(swarm.extra_env[LOAD_ENV])["seed"] is not None  # one seed for every agent
    assert "agents" not in json.loads(swarm.extra_env[LOAD_ENV])


def test_agents_config_is_validated() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        _cfg(count=0)
    with pytest.raises(ValueError, match="placement"):
        _cfg(placement=["node.hostname"])


def test_a_run_id_of_any_length_names_the_engine_objects_within_their_limits() -> None:
    """Swarm services and Kubernetes names take 63 characters: a long run id is cut in
    one place (engine_id), keeping its start second and token; the labels keep it whole."""
    long_id = new_run_id("x" * 40 + "-unbound-authoritative-with-agents", now_s=0.0)
    short = engine_id(long_id)
    assert len(short) == ENGINE_ID_MAX_CHARS and short.endswith(run_id_tail(long_id))
    assert engine_id(new_run_id("y" * 40, now_s=0.0)) != short  # the token keeps two apart
    assert engine_id("r1") == "r1" and engine_id("A b") == "a-b"
    spec = build_spec(_cfg(count=12), "127.0.0.1:53", 1, long_id, base_dir=Path("."))
    names = [spec.name(11), object_name(short, role="sampler")]
    assert all(len(n) <= 63 and re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", n) for n in names)
    assert service_kwargs(spec, 11)["labels"]["soak.run"] == long_id
    job = build_job(build_spec(_cfg("kubernetes"), "127.0.0.1:53", 1, long_id, base_dir=Path(".")))
    assert job.metadata.name == f"soak-agent-{short}" and job.metadata.labels["soak/run"] == long_id


def test_swarm_service_per_agent_with_its_segment() -> None:
    spec = _spec(placement=["node.labels.load==yes", "node.role!=manager"])
    kw = [service_kwargs(spec, i) for i in range(3)]
    assert [k["name"] for k in kw] == ["soak-agent-r1-0", "soak-agent-r1-1", "soak-agent-r1-2"]
    for i, k in enumerate(kw):
        assert k["image"] == "soak/agent:t"
        assert k["args"][:3] == ["agent", "--segment", f"{i}/3"]
        assert f"SOAK_AGENT_SEGMENT={i}/3" in k["env"]
        assert any(e.startswith(f"{LOAD_ENV}=") for e in k["env"])
        assert k["networks"] == ["host"]
        assert k["restart_policy"]["Condition"] == "none"
        assert k["mode"] == {"ReplicatedJob": {"TotalCompletions": 1, "MaxConcurrent": 1}}
        assert k["constraints"] == ["node.labels.load==yes", "node.role!=manager"]
        assert k["labels"]["soak.run"] == "r1" and k["labels"]["soak.role"] == "load-agent"
        # the task's containers name their owner too, so no other soak's sweep takes them
        assert k["container_labels"]["soak.owner"] == k["labels"]["soak.owner"]
        assert not is_stale(k["container_labels"], None, ())
        assert "{{" not in json.dumps(k["args"]) + json.dumps(k["env"])  # no .Task.Slot


def test_swarm_task_states() -> None:
    assert task_state([]) == ("pending", "")
    old = {"Version": {"Index": 1}, "Status": {"State": "failed", "Err": "x"}}
    new = {"Version": {"Index": 9}, "Status": {"State": "running"}}
    assert task_state([old, new]) == ("running", "")
    dead = {"Status": {"State": "failed", "Err": "task: non-zero exit (3)"}}
    dead["Status"]["ContainerStatus"] = {"ExitCode": 3}  # type: ignore[index]
    assert task_state([dead]) == ("failed", "task: non-zero exit (3) (exit 3)")
    assert task_state([{"Status": {"State": "complete"}}]) == ("complete", "")


class FakeDocker:
    def __init__(self, swarm: dict[str, Any], image: bool = True) -> None:
        self.swarm, self.image = swarm, image
        self.created: list[Any] = []
        self.services = SimpleNamespace(create=self._create, list=lambda filters: [])
        self.images = SimpleNamespace(get=self._get)

    def info(self) -> dict[str, Any]:
        return {"Swarm": self.swarm}

    def _get(self, name: str) -> None:
        if not self.image:
            raise ImageNotFound(name)

    def _create(self, image: str, **kw: Any) -> None:
        self.created.append((image, kw))


@pytest.mark.parametrize(
    ("swarm", "image", "message"),
    [
        ({"LocalNodeState": "inactive"}, True, "not a swarm manager"),
        ({"LocalNodeState": "active", "ControlAvailable": False}, True, "not a swarm manager"),
        ({"LocalNodeState": "active", "ControlAvailable": True}, False, "is not on this node"),
    ],
)
def test_swarm_refuses_before_starting_anything(
    swarm: dict[str, Any], image: bool, message: str
) -> None:
    fake = FakeDocker(swarm, image)
    with pytest.raises(InputError, match=message):
        SwarmEngine(fake).start(_spec())
    assert fake.created == []


def test_kubernetes_indexed_job_against_the_client_models() -> None:
    spec = _spec("kubernetes", 4, placement=["node.labels.pool==load", "node.hostname==n1"])
    job = build_job(spec)
    assert isinstance(job, k8s.V1Job)
    body = k8s.ApiClient().sanitize_for_serialization(job)
    assert body["apiVersion"] == "batch/v1" and body["kind"] == "Job"
    assert body["metadata"]["name"] == "soak-agent-r1"
    js = body["spec"]
    assert js["completionMode"] == "Indexed"
    assert js["completions"] == js["parallelism"] == 4
    assert js["backoffLimit"] == 0
    assert js["activeDeadlineSeconds"] == 8 + 2 + 5 + 120
    pod = js["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["hostNetwork"] is True
    assert pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["nodeSelector"] == {"pool": "load", "kubernetes.io/hostname": "n1"}
    (container,) = pod["containers"]
    assert container["image"] == "soak/agent:t"
    assert container["args"][:3] == ["agent", "--segment", "$JOB_COMPLETION_INDEX/4"]
    assert [e["name"] for e in container["env"]] == [LOAD_ENV]
    assert js["template"]["metadata"]["labels"] == {"soak/run": "r1", "soak/role": "load-agent"}
    # The serialized body is a valid Job for the client's models again.
    assert k8s.V1JobSpec(**{"completion_mode": "Indexed", "template": k8s.V1PodTemplateSpec()})
    with pytest.raises(InputError, match="only NAME==VALUE"):
        node_selector(["node.role!=manager"])


class FakeBatch:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.missing = False

    def create_namespaced_job(self, **kw: Any) -> None:
        self.calls.append(("create", kw))

    def delete_namespaced_job(self, **kw: Any) -> None:
        self.calls.append(("delete", kw))
        if self.missing:
            raise ApiException(status=404, reason="Not Found")


def _pod(name: str, index: int, phase: str, minute: int) -> Any:
    return SimpleNamespace(
        metadata=SimpleNamespace(
            name=name,
            annotations={"batch.kubernetes.io/job-completion-index": str(index)},
            creation_timestamp=datetime(2026, 1, 1, 0, minute, tzinfo=UTC),
        ),
        status=SimpleNamespace(
            phase=phase, reason="Error" if phase == "Failed" else None, message=None
        ),
    )


class FakeCore:
    def __init__(self, pods: list[Any]) -> None:
        self.pods = pods
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def list_namespaced_pod(self, **kw: Any) -> Any:
        self.calls.append(("list", kw))
        return SimpleNamespace(items=self.pods)

    def read_namespaced_pod_log(self, **kw: Any) -> str:
        self.calls.append(("log", kw))
        return f"log of {kw['name']}"


def test_kubernetes_engine_calls() -> None:
    batch = FakeBatch()
    pods = [
        _pod("j-0-a", 0, "Failed", 1),
        _pod("j-0-b", 0, "Succeeded", 2),
        _pod("j-1", 1, "Running", 1),
    ]
    core = FakeCore(pods)
    engine = KubernetesEngine(batch, core, namespace="load")
    spec = _spec("kubernetes", 3)
    engine.start(spec)
    (call,) = batch.calls
    assert call[0] == "create" and call[1]["namespace"] == "load"
    assert call[1]["body"].spec.completion_mode == "Indexed"
    assert engine.poll() == [
        AgentState(0, "complete"),  # the newest pod of index 0
        AgentState(1, "running"),
        AgentState(2, "pending"),
    ]
    assert core.calls[0] == (
        "list",
        {"namespace": "load", "label_selector": "job-name=soak-agent-r1"},
    )
    assert engine.logs(0) == "log of j-0-b"
    assert engine.logs(2) == ""
    engine.remove()
    assert batch.calls[-1] == (
        "delete",
        {"name": "soak-agent-r1", "namespace": "load", "propagation_policy": "Background"},
    )
    engine.remove()  # a second remove does nothing
    assert len(batch.calls) == 2
    gone = KubernetesEngine(FakeBatch(), core)
    gone._batch.missing = True
    gone.start(spec)
    gone.remove()  # already deleted: fine
