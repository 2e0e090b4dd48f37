"""ServiceMetrics over many runs: a run's series leave with it, its outcome stays as a
count without its id, its scenario labels ride on soak_run_info while it is live."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from soak.sinks.metrics import ServiceMetrics


def lines_of(registry: CollectorRegistry, run_id: str) -> list[str]:
    text = generate_latest(registry).decode()
    return [line for line in text.splitlines() if f'soak="{run_id}"' in line]


def test_a_runs_series_leave_when_it_ends_and_its_outcome_stays() -> None:
    registry = CollectorRegistry()
    m = ServiceMetrics(registry)
    for run in ("r1", "r2"):
        m.start_run(run, "day", {"team": "dns-core", "on-call": "x"})
        m.set_leak(run, "rss_anon_bytes", 3e6, "growing")
        m.observe_sampler(run, "proc", 0.01, ok=False)
        m.observe_tick(run, 0.001, 0.02)
        m.set_spool(run, "influx_v1:soak", 12, 3400)
        m.set_load_rate(run, "all", 100.0, 99.0)
        m.count_load(run, "all", 100, 1, 100)
        m.count_restart(run, "unbound")
    labels = {"soak": "r1", "resource": "rss_anon_bytes", "verdict": "growing"}
    assert registry.get_sample_value("soak_leak_verdict", labels) == 1.0
    info = {"soak": "r1", "scenario": "day", "team": "dns-core", "on_call": "x"}
    assert registry.get_sample_value("soak_run_info", info) == 1.0
    m.set_owed("r1", "influx_v1:soak", 12)
    m.end_run("r1", "failed")
    # only what it owes stays of r1; r2 is untouched
    assert lines_of(registry, "r1") == [
        'soak_spool_owed_points{sink="influx_v1:soak",soak="r1"} 12.0'
    ]
    assert len(lines_of(registry, "r2")) > 20
    assert registry.get_sample_value("soak_runs_ended_total", {"outcome": "failed"}) == 1.0
    m.set_owed("r1", "influx_v1:soak", 0)
    assert lines_of(registry, "r1") == []


def test_run_info_names_the_version_running_and_its_segment_after_a_swap() -> None:
    """Alert rules join soak_run_info: after a swap it names the new version and its
    segment (one series, its labels changed), and it leaves with the run."""
    registry = CollectorRegistry()
    m = ServiceMetrics(registry)
    m.set_run_version("r1", "format-1", 0)  # the run's parts may be told before its start
    m.start_run("r1", "up", {"team": "dns-core"})
    info = {"soak": "r1", "scenario": "up", "team": "dns-core"}
    assert (
        registry.get_sample_value("soak_run_info", {**info, "version": "format-1", "segment": "0"})
        == 1.0
    )
    m.set_run_version("r1", "format-2", 1)
    assert (
        registry.get_sample_value("soak_run_info", {**info, "version": "format-1", "segment": "0"})
        is None
    )
    assert (
        registry.get_sample_value("soak_run_info", {**info, "version": "format-2", "segment": "1"})
        == 1.0
    )
    m.set_run_version("r2", "", None)  # a run of one version without a name: no label
    m.start_run("r2", "day", {})
    assert registry.get_sample_value("soak_run_info", {"soak": "r2", "scenario": "day"}) == 1.0
    m.end_run("r1", "passed")
    assert lines_of(registry, "r1") == []
