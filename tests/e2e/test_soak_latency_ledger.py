"""One latency estimator: a real soak against unbound on loopback, two phases at different
rates, every latency figure read from the windows' stored histograms merged.

The whole run's p99 lies within its phases' p99s and is the quantile of every stored
window merged; each phase's p99 is that of its own windows; and every figure that names
the whole run (result.json, the classes table's `all` row, the `p99_ms[all]` criterion
over the run, `soak status`, `soak compare`) is the same number. No warm-up, so that the
classes table, the criteria and `soak compare` (which count after the warm-up) name the
same span as result.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soak.histogram import LatencyHistogram
from soak.runs.layout import DataDir
from soak.sinks.sqlite import SqliteStore
from tests.e2e.soakrun import run_soak
from tests.support.ledger import assert_figures_agree
from tests.support.servers import ServerProc, module_unbound
from tests.support.soaks import foreground, last_json, stored, unbound_phases_scenario

pytestmark = pytest.mark.e2e

FIRST_S, FIRST_QPS = 12, 300
SECOND_S, SECOND_QPS = 10, 1_000


server = module_unbound(threads=1)


def scenario(tmp_path: Path, port: int) -> Path:
    phases = [
        {"name": "gentle", "duration_s": f"{FIRST_S}s", "rate_qps": FIRST_QPS},
        {"name": "busy", "duration_s": f"{SECOND_S}s", "rate_qps": SECOND_QPS},
    ]
    return unbound_phases_scenario(
        tmp_path,
        port,
        "latency-ledger",
        phases,
        samplers={"interval_s": 1},
        criteria={"p99_ms_max": {"all": 1000}},
    )


def merged_windows(
    store: SqliteStore,
    run_id: str,
    cls: str,
    start_ns: int = 0,
    end_ns: int | None = None,
) -> LatencyHistogram:
    """The stored windows of a class in (start, end] merged, read here without the
    report's code: each window's `lat_hist` decoded and added."""
    out = LatencyHistogram()
    for tags, samples in store.series(run_id, "load", "lat_hist", {"class": cls}):
        assert tags["class"] == cls
        for t, text in samples:
            if t > start_ns and (end_ns is None or t <= end_ns):
                out.add(LatencyHistogram.decode(str(text)))
    return out


def ns_of(iso: str) -> int:
    from datetime import datetime

    return round(datetime.fromisoformat(iso).timestamp()) * 1_000_000_000


def test_every_latency_figure_is_a_quantile_of_the_merged_windows(
    server: ServerProc, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    status = foreground(scenario(tmp_path, server.port), data)  # passed, or failed (busy)
    run_id = status["id"]
    counts = assert_figures_agree(data, run_id, kept_up=False)
    run_dir = DataDir(data).run_dir(run_id)
    result = json.loads((run_dir / "result.json").read_text())
    report = json.loads((run_dir / "report.json").read_text())
    whole_p99 = result["load_totals"]["latency_ms"]["p99"]

    with stored(data) as store:
        whole = merged_windows(store, run_id, "all")
        # every answer of the run is in one stored window's histogram, once
        assert whole.total == counts["completed"] > 0
        assert whole_p99 == whole.quantile_ms(0.99)
        assert result["load_totals"]["latency_ms"]["max"] == whole.max_us / 1000
        phases = report["phases"]
        assert [p["name"] for p in phases] == ["gentle", "busy"]
        phase_p99 = []
        for i, phase in enumerate(phases):
            start_ns = ns_of(phase["start"]) - (1 if i == 0 else 0)
            part = merged_windows(store, run_id, "all", start_ns, ns_of(phase["end"]))
            assert part.total > 0, phase
            p99 = phase["metrics"]["lat_p99_ms"]["p99"]
            assert p99 == part.quantile_ms(0.99), phase["name"]
            assert phase["metrics"]["lat_avg_ms"] == part.latency_ms()["avg"]
            phase_p99.append(p99)
        # a whole lies within its parts
        assert min(phase_p99) <= whole_p99 <= max(phase_p99), (phase_p99, whole_p99)
        # every table that names the whole run says the same number
        rows = {row["class"]: row for row in report["classes"]}
        assert rows["all"]["p99_ms"] == whole_p99
        assert rows["all"]["p50_ms"] == result["load_totals"]["latency_ms"]["p50"]
        for cls in ("hit", "miss"):
            assert rows[cls]["p99_ms"] == merged_windows(store, run_id, cls).quantile_ms(0.99)
    criterion = next(
        c for c in result["criteria"] if c["name"] == "p99_ms[all]" and c["window"] == "run"
    )
    assert criterion["value"] == whole_p99
    assert status["p99_whole_run_ms"] == whole_p99  # the status `soak start` printed
    shown = run_soak("status", run_id, "--json", "--data-dir", str(data))
    code = 0 if status["status"] == "passed" else 1  # 1: the run failed a criterion
    assert shown.returncode == code, shown.stderr
    assert last_json(shown.stdout)["p99_whole_run_ms"] == whole_p99
    compared = run_soak("compare", run_id, run_id, "--json", "--data-dir", str(data))
    assert compared.returncode == 0, compared.stderr[-2000:]
    figures = {f["name"]: f for f in last_json(compared.stdout)["figures"]}
    assert figures["p99 latency"]["a"] == whole_p99


# Two workers and 2-s ticks, a warm-up at one rate and a steady phase at another: the
# schedule is exact (due is rate x seconds of each phase, to the query), every figure of
# the run agrees with its ledger, and the generator criterion is sent over due, never
# above 1. The tick (2 s) is not the window (1 s): nothing depends on their being equal.
WARMUP_S, WARMUP_QPS = 4, 500
STEADY_S, STEADY_QPS = 10, 1_500


def test_two_workers_at_2s_ticks_agree_with_the_ledger(server: ServerProc, tmp_path: Path) -> None:
    phases = [
        {"name": "warmup", "duration_s": f"{WARMUP_S}s", "rate_qps": WARMUP_QPS, "warmup": True},
        {"name": "steady", "duration_s": f"{STEADY_S}s", "rate_qps": STEADY_QPS},
    ]
    path = unbound_phases_scenario(
        tmp_path, server.port, "ticks-2s", phases, samplers={"interval_s": 2}, seed=11
    )
    data = tmp_path / "data"
    status = foreground(path, data)  # passed, or failed (a busy machine)
    counts = assert_figures_agree(data, status["id"], kept_up=False)
    # the schedule is exact whatever the machine did: rate x seconds of each phase
    assert counts["due"] == WARMUP_QPS * WARMUP_S + STEADY_QPS * STEADY_S, counts
    assert counts["sent"] + counts["skipped"] == counts["due"]
    assert counts["completed"] + counts["lost"] + counts["abandoned"] == counts["sent"]
    generator = next(c for c in status["criteria"] if c["name"] == "generator")
    assert 0 < generator["value"] <= 1, generator
    report = json.loads((DataDir(data).run_dir(status["id"]) / "result.json").read_text())
    assert report["load_totals"]["due"] == counts["due"]
