"""`kubernetes`: the agents as one Indexed Job (completion index = segment index).

The Job has completions = parallelism = N and completion_mode Indexed; each pod
reads its index from JOB_COMPLETION_INDEX (`--segment '$JOB_COMPLETION_INDEX/N'`),
runs on the host's network, is never restarted (backoff_limit 0, restartPolicy
Never) and is given a deadline of the run's duration plus a margin. The
placement's `==` constraints become a nodeSelector (`node.hostname` as
kubernetes.io/hostname, `node.labels.KEY` as KEY).

The API calls go through an injected BatchV1Api and CoreV1Api (the default: from
the kubeconfig, or in-cluster). This engine has not been run against a cluster:
its objects are checked against the client's models and its calls against a fake
(docs/scale.md).
"""

from __future__ import annotations

import math
from typing import Any

from kubernetes import client as k8s

from soak.agents.engine import AgentState, State
from soak.agents.spec import ROLE, AgentSpec, engine_id, object_name
from soak.errors import InputError

INDEX_ENV = "JOB_COMPLETION_INDEX"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
START_MARGIN_S = 120  # pulling the image and scheduling, before the deadline counts
POD_PHASES: dict[str, State] = {
    "Pending": "pending",
    "Running": "running",
    "Succeeded": "complete",
    "Failed": "failed",
    "Unknown": "pending",
}


def node_selector(placement: list[str]) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for rule in placement:
        if "!=" in rule:
            raise InputError(f"kubernetes: placement {rule!r}: only NAME==VALUE is supported")
        name, _, value = (s.strip() for s in rule.partition("=="))
        if name == "node.hostname":
            out["kubernetes.io/hostname"] = value
        elif name.startswith("node.labels."):
            out[name.removeprefix("node.labels.")] = value
        else:
            out[name] = value
    return out or None


def build_job(spec: AgentSpec) -> Any:
    """The agents' V1Job (pure: checked in tests against the client's models)."""
    n = spec.count
    labels = {k.replace("soak.", "soak/"): v for k, v in spec.labels.items()}
    container = k8s.V1Container(
        name=spec.role,
        image=spec.agents.image,
        image_pull_policy="IfNotPresent",
        args=spec.argv(f"${INDEX_ENV}/{n}"),  # the agent reads the index from its env
        env=[k8s.V1EnvVar(name=k, value=v) for k, v in spec.env().items()],
    )
    pod = k8s.V1PodSpec(
        containers=[container],
        restart_policy="Never",
        host_network=True,
        dns_policy="ClusterFirstWithHostNet",
        node_selector=node_selector(spec.agents.placement),
        host_pid=spec.host_pid or None,
    )
    deadline_s = math.ceil(spec.duration_s + spec.drain_s + START_MARGIN_S)
    job_spec = k8s.V1JobSpec(
        completion_mode="Indexed",
        completions=n,
        parallelism=n,
        backoff_limit=0,
        active_deadline_seconds=deadline_s,
        template=k8s.V1PodTemplateSpec(metadata=k8s.V1ObjectMeta(labels=labels), spec=pod),
    )
    return k8s.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=k8s.V1ObjectMeta(name=spec.name(), labels=labels),
        spec=job_spec,
    )


def default_apis() -> tuple[Any, Any]:
    from kubernetes import config
    from kubernetes.config.config_exception import ConfigException

    try:
        config.load_kube_config()
    except (ConfigException, OSError) as exc:
        try:
            config.load_incluster_config()
        except ConfigException:
            raise InputError(f"kubernetes: no kubeconfig and not in a cluster: {exc}") from None
    return k8s.BatchV1Api(), k8s.CoreV1Api()


class KubernetesEngine:
    name = "kubernetes"

    def __init__(self, batch: Any = None, core: Any = None, namespace: str = "default") -> None:
        self._batch, self._core = batch, core
        self.namespace = namespace
        self._job: str | None = None
        self._count = 0

    def start(self, spec: AgentSpec) -> None:
        if self._batch is None or self._core is None:
            self._batch, self._core = default_apis()
        job = build_job(spec)
        self._count = spec.count
        self._batch.create_namespaced_job(namespace=self.namespace, body=job)
        self._job = spec.name()

    def _pods(self) -> dict[int, Any]:
        """The newest pod of each completion index."""
        pods = self._core.list_namespaced_pod(
            namespace=self.namespace, label_selector=f"job-name={self._job}"
        ).items
        newest: dict[int, Any] = {}
        for pod in pods:
            index = (pod.metadata.annotations or {}).get(INDEX_ANNOTATION)
            if index is None:
                continue
            i = int(index)
            old = newest.get(i)
            if old is None or pod.metadata.creation_timestamp > old.metadata.creation_timestamp:
                newest[i] = pod
        return newest

    def poll(self) -> list[AgentState]:
        pods = self._pods()
        out = []
        for i in range(self._count):
            pod = pods.get(i)
            if pod is None:
                out.append(AgentState(i, "pending"))
                continue
            state = POD_PHASES.get(pod.status.phase or "Unknown", "pending")
            why = (pod.status.reason or pod.status.message or "") if state == "failed" else ""
            out.append(AgentState(i, state, why))
        return out

    def logs(self, index: int) -> str:
        pod = self._pods().get(index)
        if pod is None:
            return ""
        text = self._core.read_namespaced_pod_log(
            name=pod.metadata.name, namespace=self.namespace, container="agent"
        )
        return str(text)

    def sweep(self, run_id: str, role: str = ROLE) -> None:
        if self._batch is None or self._core is None:
            self._batch, self._core = default_apis()
        self._job = object_name(engine_id(run_id), role=role)
        self.remove()

    def remove(self) -> None:
        if self._job is None:
            return
        from kubernetes.client.exceptions import ApiException

        try:
            self._batch.delete_namespaced_job(
                name=self._job, namespace=self.namespace, propagation_policy="Background"
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
        self._job = None
