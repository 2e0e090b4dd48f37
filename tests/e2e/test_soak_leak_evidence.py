"""A leak from the first query is found in minutes by evidence, not after a blanket wait.

refdns (scenarios/refdns-demo.yaml) holding 2 MiB a second from its start (-shape=leak:
7 GiB/h), at 1-min leak windows with the default 4-h wait for start-up growth: at its
pace it fills this machine's memory within leaks.horizon_s, so it is `growing` as soon
as its short windows' trend is significant, and the run fails; the verdict says when the
limit is reached.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.refdns import refdns_binary
from tests.support.servers import named_recursive_conf
from tests.support.soaks import ROOT, foreground, stored

pytestmark = pytest.mark.e2e

SCENARIO = ROOT / "scenarios" / "refdns-demo.yaml"


def leaking_refdns(data: Path, shape: str, rate: str, window_s: int) -> dict[str, Any]:
    """refdns-demo with the leak `shape` at `rate` (its argv 8 and 9) from its first query,
    leak windows of `window_s` with the default 4-h wait for start-up growth, a steady
    phase of 150 s (fewer whole windows than min_windows, 6), run to its end: failed."""
    return foreground(
        SCENARIO, data,
        "--set", f"target.argv.8={shape}",
        "--set", f"target.argv.9={rate}",
        "--set", f"leaks.window_s={window_s}s",
        "--set", "leaks.interval_s=10s",
        "--set", "leaks.min_windows=6",
        "--set", "leaks.startup_max_s=4h",  # the default wait: not what finds it
        "--set", "phases.0.duration_s=20s",
        "--set", "phases.1.duration_s=150s",
        "--set", "criteria.p99_ms_max={all: 1000}",
        "--set", "criteria.api_latency_ms_max={}",
        codes=(1,), timeout_s=400,
    )  # fmt: skip


def test_refdns_leaking_from_its_first_query_is_growing_within_minutes(tmp_path: Path) -> None:
    refdns_binary()
    data = tmp_path / "data"
    # argv 8 and 9 (-querylog-mmap-bytes, -leak=false): the leak shape instead
    st = leaking_refdns(data, "-shape=leak", "-shape-kib-per-s=2048", window_s=60)
    verdicts = {v["resource"]: v for v in st["verdicts"]}
    rss = verdicts["rss_anon_bytes"]
    assert rss["verdict"] == "growing", rss
    assert rss["slope_per_hour"] > 4 * 1024**3, rss
    with stored(data) as store:
        passes = [
            p.fields["verdict"]
            for p in store.points(st["id"], "leak")
            if p.tags.get("resource") == "rss_anon_bytes"
        ]
    # The steady phase (150 s) is shorter than min_windows (6) leak windows of 60 s: the
    # trend of whole windows never had a say; the limit's short windows did, and kept it.
    assert passes.count("growing") >= 2 and passes[-1] == "growing", passes


def test_refdns_leaking_fds_from_its_first_query_is_a_staircase_found_in_minutes(
    tmp_path: Path,
) -> None:
    """One /dev/null fd kept open every 25 s from its start (-shape=fds), at 30-s leak
    windows with the default wait for start-up growth: a count whose window minima never
    fall back, climbing in steps: `growing` before min_windows (6) windows have closed."""
    refdns_binary()
    data = tmp_path / "data"
    st = leaking_refdns(data, "-shape=fds", "-shape-per-s=0.04", window_s=30)
    fds = {v["resource"]: v for v in st["verdicts"]}["fds"]
    assert fds["verdict"] == "growing", fds
    assert "a staircase that never falls back" in fds["note"], fds
    assert fds["windows"] < 6, fds


UNBOUND_CACHE = ROOT / "scenarios" / "unbound-cache.yaml"
# Short: 5-s windows, the leak threshold low enough that the cache's filling is above it.
CACHE_SHORT = [
    "--set", "phases.0.duration_s=10s",
    "--set", "phases.1.duration_s=60s",
    "--set", "samplers.interval_s=1s",
    "--set", "leaks.window_s=5s",
    "--set", "leaks.interval_s=5s",
    "--set", "leaks.thresholds={rss_anon_bytes: 5MiB/h}",
    "--set", "criteria.p99_ms_max={all: 1000}",
]  # fmt: skip


def cache_run(data: Path, *sets: str) -> dict[str, Any]:
    return foreground(UNBOUND_CACHE, data, *CACHE_SHORT, *sets)


def test_unbound_filling_its_cache_is_explained_by_its_own_accounting(work: Path) -> None:
    """Its anonymous RSS rises with the caches it reports (unbound's remote control); the
    rise is `levelling`, explained, where the RSS alone waits (start-up growth or a leak
    from the start: nothing else tells them apart). `work`: a short directory, for the
    control socket's path (at most 107 bytes)."""
    tmp_path = work
    st = cache_run(tmp_path / "with")
    rss = {v["resource"]: v for v in st["verdicts"]}["rss_anon_bytes"]
    with stored(tmp_path / "with") as store:
        cache = store.series(st["id"], "runtime", "cache_bytes")
        queries = store.series(st["id"], "runtime", "server_queries")
    assert cache and cache[0][1][-1][1] > cache[0][1][0][1]  # the cache filled
    assert queries and queries[0][1][-1][1] > 10_000  # unbound counted the load
    assert rss["verdict"] == "levelling", rss
    alone = cache_run(tmp_path / "alone", "--set", "samplers.server=null")
    rss_alone = {v["resource"]: v for v in alone["verdicts"]}["rss_anon_bytes"]
    assert rss_alone["verdict"] == "insufficient", rss_alone


def test_bind_filling_its_cache_is_explained_by_its_statistics_channel(tmp_path: Path) -> None:
    """BIND (named, recursive) filling its cache, the cache's own figures read from its
    statistics channel (`samplers.server: {kind: bind}`): its RSS rises with the cache it
    reports, `levelling` (explained), where the RSS alone waits (`insufficient`)."""
    doc = yaml.safe_load(UNBOUND_CACHE.read_text())
    doc["name"] = "bind-cache"
    doc["target"] = {
        **doc["target"],
        "name": "bind9",
        "argv": ["named", "-g", "-n", "1", "-c", "{run_dir}/named.conf"],
        "ports": {"dns": {"protocol": "both"}, "stats": {}},
        "files": [{"dest": "named.conf", "content": named_recursive_conf("256m", "{port.stats}")}],
    }
    doc["samplers"]["server"] = {"kind": "bind", "port": "stats"}
    for cls in doc["load"]["mix"]:  # relative to the scenario's folder
        if "file" in cls:
            cls["file"] = str(UNBOUND_CACHE.parent / cls["file"])
    scenario = tmp_path / "bind-cache.yaml"
    scenario.write_text(yaml.safe_dump(doc, sort_keys=False))
    st = foreground(scenario, tmp_path / "with", *CACHE_SHORT)
    rss = {v["resource"]: v for v in st["verdicts"]}["rss_anon_bytes"]
    with stored(tmp_path / "with") as store:
        cache = store.series(st["id"], "runtime", "cache_bytes")
    assert cache and cache[0][1][-1][1] > 2 * cache[0][1][0][1]  # the cache filled
    assert rss["verdict"] == "levelling", rss
    assert "explained" in rss["note"], rss
    alone = foreground(scenario, tmp_path / "alone", *CACHE_SHORT, "--set", "samplers.server=null")
    rss_alone = {v["resource"]: v for v in alone["verdicts"]}["rss_anon_bytes"]
    assert rss_alone["verdict"] == "insufficient", rss_alone
