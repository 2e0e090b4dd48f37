"""The service's own Prometheus metrics, on a CollectorRegistry the caller owns.

No default REGISTRY: one run (or one test) builds its own registry and passes
it here, so two services in one process never share counters.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LEAK_VERDICTS = ("ok", "growing", "levelling", "insufficient")

_DURATION_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class ServiceMetrics:
    """Counters and gauges of sinks, samplers, the scheduler, the load and leak verdicts."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
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
            "Points waiting in a sink's spool",
            ["sink"],
            registry=registry,
        )
        self.spool_bytes = Gauge(
            "soak_spool_bytes", "Size of a sink's spool file", ["sink"], registry=registry
        )
        self.sampler_errors = Counter(
            "soak_sampler_errors", "Sampler runs that failed", ["sampler"], registry=registry
        )
        self.sampler_duration = Histogram(
            "soak_sampler_duration_seconds",
            "Time one sampler took in one tick",
            ["sampler"],
            buckets=_DURATION_BUCKETS_S,
            registry=registry,
        )
        self.tick_duration = Histogram(
            "soak_tick_duration_seconds",
            "Time all samplers of one tick took",
            buckets=_DURATION_BUCKETS_S,
            registry=registry,
        )
        self.scheduler_lag = Gauge(
            "soak_scheduler_lag_seconds",
            "How late the last tick started after its scheduled time",
            registry=registry,
        )
        self.ticks = Counter("soak_ticks", "Ticks run", registry=registry)
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

    def set_load_rate(self, soak: str, cls: str, target_qps: float, achieved_qps: float) -> None:
        self.load_rate_target.labels(soak, cls).set(target_qps)
        self.load_rate_achieved.labels(soak, cls).set(achieved_qps)

    def count_load(
        self, soak: str, cls: str, sent: float, lost: float, due: float | None = None
    ) -> None:
        """One closed window's sent, lost (and due) queries of one class (or "all"): rates
        of these counters are window sums over window seconds, as the ledger's."""
        self.load_sent.labels(soak, cls).inc(max(sent, 0.0))
        self.load_lost.labels(soak, cls).inc(max(lost, 0.0))
        if due is not None:
            self.load_due.labels(soak, cls).inc(max(due, 0.0))

    def count_restart(self, soak: str, target: str) -> None:
        self.target_restarts.labels(soak, target).inc()

    def set_leak(self, soak: str, resource: str, slope_per_hour: float, verdict: str) -> None:
        """The latest verdict of one resource of one run (a state set: one verdict is 1)."""
        self.leak_slope.labels(soak, resource).set(slope_per_hour)
        for name in LEAK_VERDICTS:
            self.leak_verdict.labels(soak, resource, name).set(1.0 if name == verdict else 0.0)

    def observe_sampler(self, sampler: str, duration_s: float, ok: bool) -> None:
        self.sampler_duration.labels(sampler).observe(duration_s)
        if not ok:
            self.sampler_errors.labels(sampler).inc()

    def observe_tick(self, lag_s: float, duration_s: float) -> None:
        self.ticks.inc()
        self.scheduler_lag.set(lag_s)
        self.tick_duration.observe(duration_s)
