"""The service's own Prometheus metrics, on a CollectorRegistry the caller owns.

No default REGISTRY: one run (or one test) builds its own registry and passes
it here, so two services in one process never share counters.

A service runs for months and many runs: every series of a run carries its id
(`soak`) and leaves when the run ends (`forget_run`); what stays of an ended run
is one count by outcome (`soak_runs_ended_total{outcome}`) and, while a sink
still owes its points, `soak_spool_owed_points{soak,sink}` (removed once the
spool is empty). `soak_run_info{soak,scenario,...}` carries a live run's
scenario labels (`alerting.labels`, a team) for rules and dashboards to join on.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterable
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

M = TypeVar("M", bound=MetricWrapperBase)

LEAK_VERDICTS = ("ok", "growing", "levelling", "insufficient")

_DURATION_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


def label_name(key: str) -> str:
    """A scenario label's key as a Prometheus label name (`team`, `on_call`)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", key)
    return name if re.match(r"[A-Za-z_]", name) else f"_{name}"


class RunInfo(Collector):
    """`soak_run_info`: 1 per live run, its labels the scenario's (they differ by run)."""

    def __init__(self) -> None:
        self._runs: dict[str, dict[str, str]] = {}
        self._versions: dict[str, dict[str, str]] = {}  # soak -> version (and segment) now
        self._lock = threading.Lock()

    def set(self, soak: str, labels: dict[str, str]) -> None:
        with self._lock:
            self._runs[soak] = {**labels, "soak": soak}

    def set_version(self, soak: str, version: dict[str, str]) -> None:
        with self._lock:
            self._versions[soak] = version

    def forget(self, soak: str) -> None:
        with self._lock:
            self._runs.pop(soak, None)
            self._versions.pop(soak, None)

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily("soak_run_info", "A live run and its scenario's labels")
        with self._lock:
            for soak, labels in self._runs.items():
                family.add_sample("soak_run_info", {**labels, **self._versions.get(soak, {})}, 1.0)
        yield family


class ServiceMetrics:
    """Counters and gauges of sinks, samplers, the scheduler, the load and leak verdicts."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        # run id -> the (metric, label values) of its series, removed when it ends
        self._series: dict[str, set[tuple[MetricWrapperBase, tuple[str, ...]]]] = {}
        self._lock = threading.Lock()
        self.run_info = RunInfo()
        registry.register(self.run_info)
        self.runs_ended = Counter(
            "soak_runs_ended", "Runs that ended, by outcome", ["outcome"], registry=registry
        )
        self.points_written = Counter(
            "soak_points_written", "Points a sink accepted", ["sink"], registry=registry
        )
        self.points_spooled = Counter(
            "soak_points_spooled",
            "Points written to a sink's spool file",
            ["sink"],
            registry=registry,
        )
        self.points_replayed = Counter(
            "soak_points_replayed",
            "Spooled points a sink accepted later",
            ["sink"],
            registry=registry,
        )
        self.points_dropped = Counter(
            "soak_points_dropped",
            "Points lost (spool size limit, rejected by the sink)",
            ["sink"],
            registry=registry,
        )
        self.spool_depth = Gauge(
            "soak_spool_depth_points",
            "Points waiting in the spool of a live run's sink",
            ["soak", "sink"],
            registry=registry,
        )
        self.spool_bytes = Gauge(
            "soak_spool_bytes",
            "Size of the spool file of a live run's sink",
            ["soak", "sink"],
            registry=registry,
        )
        self.spool_owed = Gauge(
            "soak_spool_owed_points",
            "Points an ended run's sink still owes (its spool, replayed until taken)",
            ["soak", "sink"],
            registry=registry,
        )
        self.sampler_errors = Counter(
            "soak_sampler_errors",
            "Sampler runs that failed",
            ["soak", "sampler"],
            registry=registry,
        )
        self.sampler_duration = Histogram(
            "soak_sampler_duration_seconds",
            "Time one sampler took in one tick",
            ["soak", "sampler"],
            buckets=_DURATION_BUCKETS_S,
            registry=registry,
        )
        self.tick_duration = Histogram(
            "soak_tick_duration_seconds",
            "Time all samplers of one tick took",
            ["soak"],
            buckets=_DURATION_BUCKETS_S,
            registry=registry,
        )
        self.scheduler_lag = Gauge(
            "soak_scheduler_lag_seconds",
            "How late the last tick started after its scheduled time",
            ["soak"],
            registry=registry,
        )
        self.ticks = Counter("soak_ticks", "Ticks run", ["soak"], registry=registry)
        self.load_rate_target = Gauge(
            "soak_load_rate_target_qps",
            "Target query rate",
            ["soak", "class"],
            registry=registry,
        )
        self.load_rate_achieved = Gauge(
            "soak_load_rate_achieved_qps",
            "Achieved query rate over the last interval",
            ["soak", "class"],
            registry=registry,
        )
        # Counters (not only gauges) so that Prometheus rules can take rate() of losses.
        self.load_sent = Counter(
            "soak_load_sent",
            "Queries sent by the load engine",
            ["soak", "class"],
            registry=registry,
        )
        self.load_due = Counter(
            "soak_load_due",
            "Queries the schedule put in the closed windows (sent or skipped)",
            ["soak", "class"],
            registry=registry,
        )
        self.load_lost = Counter(
            "soak_load_lost",
            "Queries that got no answer within the timeout",
            ["soak", "class"],
            registry=registry,
        )
        self.target_restarts = Counter(
            "soak_target_restarts",
            "Restarts of the target under test after it exited",
            ["soak", "target"],
            registry=registry,
        )
        self.leak_slope = Gauge(
            "soak_leak_slope_per_hour",
            "Growth of a resource per hour",
            ["soak", "resource"],
            registry=registry,
        )
        self.leak_verdict = Gauge(
            "soak_leak_verdict",
            "1 for the current verdict of a resource, 0 for the others",
            ["soak", "resource", "verdict"],
            registry=registry,
        )

    def _of(self, metric: M, soak: str, *rest: str) -> M:
        """The child of `metric` for run `soak`, remembered so that it leaves with the run."""
        values = (soak, *rest)
        with self._lock:
            self._series.setdefault(soak, set()).add((metric, values))
        return metric.labels(*values)

    def start_run(self, soak: str, scenario: str, labels: dict[str, str]) -> None:
        """A run is live: `soak_run_info` with its scenario's name and labels."""
        named = {label_name(k): v for k, v in labels.items()}
        self.run_info.set(soak, {**named, "scenario": scenario})

    def set_run_version(self, soak: str, version: str, segment: int | None) -> None:
        """The version a live run's target runs now (`version` on `soak_run_info`) and,
        across an upgrade, its segment (0 before the first swap): set at the run's start
        and at each swap, so that an alert joined on it names the version it fires in."""
        labels = {"version": version} if version else {}  # none given: no label
        if segment is not None:
            labels["segment"] = str(segment)
        self.run_info.set_version(soak, labels)

    def end_run(self, soak: str, outcome: str) -> None:
        """A run has ended: its series go, its outcome is counted (no run id)."""
        self.runs_ended.labels(outcome).inc()
        self.forget_run(soak)

    def forget_run(self, soak: str) -> None:
        """Every series of run `soak` leaves /metrics (its owed spools have their own)."""
        self.run_info.forget(soak)
        with self._lock:
            series = self._series.pop(soak, set())
        for metric, values in series:
            with contextlib.suppress(KeyError):  # never observed after all
                metric.remove(*values)

    def set_spool(self, soak: str, sink: str, depth_points: int, size_bytes: int) -> None:
        self._of(self.spool_depth, soak, sink).set(depth_points)
        self._of(self.spool_bytes, soak, sink).set(size_bytes)

    def set_owed(self, soak: str, sink: str, depth_points: int) -> None:
        """What an ended run's sink still owes; 0 removes the series."""
        if depth_points > 0:
            self.spool_owed.labels(soak, sink).set(depth_points)
            return
        with contextlib.suppress(KeyError):
            self.spool_owed.remove(soak, sink)

    def set_load_rate(self, soak: str, cls: str, target_qps: float, achieved_qps: float) -> None:
        self._of(self.load_rate_target, soak, cls).set(target_qps)
        self._of(self.load_rate_achieved, soak, cls).set(achieved_qps)

    def count_load(
        self, soak: str, cls: str, sent: float, lost: float, due: float | None = None
    ) -> None:
        """One closed window's sent, lost (and due) queries of one class (or "all"): rates
        of these counters are window sums over window seconds, as the ledger's."""
        self._of(self.load_sent, soak, cls).inc(max(sent, 0.0))
        self._of(self.load_lost, soak, cls).inc(max(lost, 0.0))
        if due is not None:
            self._of(self.load_due, soak, cls).inc(max(due, 0.0))

    def count_restart(self, soak: str, target: str) -> None:
        self._of(self.target_restarts, soak, target).inc()

    def set_leak(self, soak: str, resource: str, slope_per_hour: float, verdict: str) -> None:
        """The latest verdict of one resource of one run (a state set: one verdict is 1)."""
        self._of(self.leak_slope, soak, resource).set(slope_per_hour)
        for name in LEAK_VERDICTS:
            child = self._of(self.leak_verdict, soak, resource, name)
            child.set(1.0 if name == verdict else 0.0)

    def observe_sampler(self, soak: str, sampler: str, duration_s: float, ok: bool) -> None:
        self._of(self.sampler_duration, soak, sampler).observe(duration_s)
        if not ok:
            self.count_sampler_error(soak, sampler)

    def count_sampler_error(self, soak: str, sampler: str) -> None:
        self._of(self.sampler_errors, soak, sampler).inc()

    def observe_tick(self, soak: str, lag_s: float, duration_s: float) -> None:
        self._of(self.ticks, soak).inc()
        self._of(self.scheduler_lag, soak).set(lag_s)
        self._of(self.tick_duration, soak).observe(duration_s)
