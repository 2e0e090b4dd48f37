"""Every bench under bench/ still runs: its `--smoke` mode (seconds, tiny sizes, the same
code path, its real peers started on loopback as the full bench starts them) as a
subprocess, which must exit 0 and print its result line. A bench whose code no longer
matches what it calls fails here, not on the day someone needs its figures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.skips import docker_skip_reason

pytestmark = pytest.mark.integration

BENCH = Path(__file__).resolve().parents[2] / "bench"
# Recordings and the corpus's judge, not benches with a smoke mode.
NOT_BENCHES = {
    "record_leak_corpus.py",
    "leak_corpus_cases.py",
    "leak_corpus_real_time.py",
    "leak_accuracy.py",
    "replay_rate_search.py",  # replay_vs_dnsperf.py's rate search (--flat-out search)
}
N = r"[\d,.]+"  # a figure as the benches print them
# Each bench and the line its smoke run must print: its ratio or its result.
RESULT_LINES = {
    "churn_soak.py": r"^server fds during the load: min \d+, max \d+$",
    "compare_aa.py": r"^pairs with a figure called worse or better: [01] of 1$",
    "doh_clients.py": rf"^ratio soak/httpx: q/s {N}, CPU per query {N}$",
    "import_graph.py": r"^import graph: \d+ modules, \d+ imports, 0 from a lower layer",
    "leak_pass.py": rf"^0.5 h / 0.25 h, steady_cpu_s: {N}$",
    "replay_doh_windows.py": r"^load average \[.*\]: sent [1-9]\d*, completed [1-9]\d*, ",
    "replay_in_soak.py": rf"^realtime, medians of 1: alone p99 {N} µs; in a soak, windows"
    rf" within {N} µs {N}%, worst window p99 {N} µs; worst in a soak / alone {N}"
    r" \(generator: [a-z, ]+\); late windows \d+, of which without steal time \d+$",
    "ledger_store_size.py": rf'^  "day_mib_histograms": {N},?$',
    "load_vs_dnsperf.py": rf"^ratio builtin/dnsperf q/s {N} \(goal >= 1.1\)$",
    "pprof_overhead.py": r"^profiles: [1-9]\d* captures, ",
    "refdns_series.py": r"^verdicts: rss_anon_bytes ",
    "refdns_target.py": rf"^local +{N} +{N} +{N}$",
    "replay_memory.py": r"; clients replayed [1-9]\d* of [1-9]\d* in the capture ",
    "replay_vs_dnsperf.py": rf"^  ratio replay/dnsperf: answered q/s {N}, CPU per answer {N}$",
    "report_long.py": r"^20 min at 1-s ticks \| .* \| True$",
    "scenario_disk.py": rf"^unbound-cache: tick 10 s, {N} samples a tick, .* MiB a day$",
    "service_soak.py": rf"^\| RssAnon \| {N} MiB -> {N} MiB \| ",
    "sinks.py": rf"^sink victoria-metrics \(influx_v2, batch 5000\): {N} points/s .* "
    rf"peer influxdb-client Point objects {N} points/s: {N}x\)$",
    "smaps_by_kind.py": r"^pid \d+: [1-9]\d* readings in ",
    "soak_upgrade_long.py": r"^audit \(exit 0\): \S+: every load figure agrees with the run's",
    "synthetic_store.py": rf"/run-600x1s\.db  {N} MiB ",
    "tick_profile.py": r"^\| tick job \(whole\) \| [1-9]\d* \| ",
    "window_fold_cost.py": rf"^after \(lat_hist\): {N} ns CPU per answer ",
}
DOCKER_BENCHES = {
    "targets_ready.py": r"^docker CLI pdns \(ref\) +ready: median ",
}
SWARM_BENCHES = {
    "agents_vs_dnsperf.py": r"^N=1: swarm/local CPU per answer: ",
}
TIMEOUT_S = 300  # a smoke run takes seconds; this is for a machine that is very busy


def smoke(name: str, line: str, *options: str) -> str:
    proc = subprocess.Popen(
        [sys.executable, str(BENCH / name), "--smoke", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=BENCH.parent,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.terminate()  # SIGTERM first: the benches that trap it stop what they started
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        err += f"\n(stopped after {TIMEOUT_S} s)"
    said = f"stdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"
    assert proc.returncode == 0, f"{name} --smoke exit {proc.returncode}\n{said}"
    assert re.search(line, out, re.MULTILINE), f"no line {line!r} from {name}\n{said}"
    return out


def test_every_bench_has_a_smoke_run() -> None:
    benches = {p.name for p in BENCH.glob("*.py")} - NOT_BENCHES
    smoked = {*RESULT_LINES, *DOCKER_BENCHES, *SWARM_BENCHES}
    assert benches == smoked, f"not smoke-tested: {benches - smoked}; gone: {smoked - benches}"
    for name in benches:
        assert "--smoke" in (BENCH / name).read_text(), f"{name} has no --smoke"


@pytest.mark.parametrize("name", sorted(RESULT_LINES))
def test_bench_smoke(name: str) -> None:
    smoke(name, RESULT_LINES[name])


def test_replay_memory_smoke_over_dot_plays_the_compiled_stream_loop() -> None:
    """The bench fails where the Python loop would play; over DoT it opens connections."""
    line = r"^replay \(dot\): .*; clients replayed [1-9]\d* .* connections \{'opened': [1-9]"
    smoke("replay_memory.py", line, "--transport", "dot")


def test_replay_vs_dnsperf_smoke_searches_the_replays_flat_out_rate() -> None:
    """--flat-out search: each probe printed, then the searched rate against dnsperf's."""
    probe = rf"^  round 0 replay probe: asked {N} q/s, answered {N} q/s, lost \d+, skipped \d+"
    out = smoke("replay_vs_dnsperf.py", probe, "--flat-out", "search")
    line = r"^  round 0 replay (searched|none within the bound, lowest)( \(at --max-rate\))?:"
    line += rf" rate {N} q/s,"
    line += rf" answered {N} q/s, CPU {N} ms/1k; dnsperf {N} q/s, {N} ms/1k"
    line += rf" \(lost {N}% of its sent\);"
    line += rf" ratio q/s {N}, CPU per answer {N}; probes [1-3]$"
    assert re.search(line, out, re.MULTILINE), f"no line {line!r}\n{out[-3000:]}"


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(DOCKER_BENCHES))
def test_docker_bench_smoke(name: str) -> None:
    reason = docker_skip_reason(["soak-test/pdns-auth", "soak-test/unbound"])
    if reason is not None:
        pytest.skip(reason)
    smoke(name, DOCKER_BENCHES[name])


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(SWARM_BENCHES))
def test_swarm_bench_smoke(name: str, swarm: Any) -> None:
    smoke(name, SWARM_BENCHES[name])
