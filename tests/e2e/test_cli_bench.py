"""`soak bench` against real unbound on loopback: the knee in its bracket, the tables,
criteria and exit codes, and a generator-bound run said aloud."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.servers import bench_load, unbound_process_target
from tests.support.skips import docker_skip_reason

pytestmark = pytest.mark.e2e

SOAK = str(Path(sys.executable).parent / "soak")


def unbound_scenario(tmp: Path, *, threads: int, workers: int, bench: dict[str, Any]) -> Path:
    scenario = {
        "name": "bench-unbound",
        "target": unbound_process_target(threads),
        "load": bench_load(
            workers,
            [
                {
                    "name": "local",
                    "queries": ["www.example.test A"],
                    "expect": {"rcodes": ["NOERROR"]},
                },
                {"name": "nx", "queries": ["nope.example.test A"]},
            ],
        ),
        "phases": [{"name": "p", "duration_s": 10}],
        "bench": bench,
    }
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def soak_bench(*args: str, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SOAK, "bench", *args], capture_output=True, text=True, timeout=timeout_s)


SHORT = {"runs": 2, "duration_s": 1.5, "throwaway_s": 0.5, "warm_rate_qps": 500}


def test_knee_within_its_bracket_tables_and_a_failed_floor(tmp_path: Path) -> None:
    bench = {
        **SHORT,
        "rates_qps": [2000],
        "fixed_duration_s": 1.5,
        "counters": [],
        "knee": {"step_s": 1, "settle_s": 0.5, "start_rate_qps": 8000, "tolerance": 0.1},
        "criteria": {"capacity_qps_min": {"local": 1e9}, "fixed_p99_ms_max": {"all": 1000}},
    }
    scenario = unbound_scenario(tmp_path, threads=1, workers=2, bench=bench)
    out = tmp_path / "out"
    proc = soak_bench(str(scenario), "--classes", "local", "--out", str(out), "--json")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("soak: bench failed: capacity local")
    result = json.loads(proc.stdout)
    (row,) = result["classes"]
    assert row["name"] == "local" and row["warm_names"] == 1
    sat = row["saturation"]
    assert len(sat["runs"]) == 2 and sat["qps"]["median"] > 1000
    assert sat["target_cores"] is not None and sat["cpu_us_per_query"] > 0
    knee = row["knee"]
    steps = knee["steps"]
    assert knee["floor_p50_ms"] is not None and knee["slo_p50_ms"] >= knee["floor_p50_ms"]
    if knee["generator_bound"]:  # the generator's limit came first: said so, bracket ends there
        assert steps[-1]["why"] == "generator"
    else:
        assert knee["knee_high_qps"] is not None, steps
        assert knee["knee_low_qps"] <= knee["knee_qps"] <= knee["knee_high_qps"]
        assert knee["width_pct"] <= 10.0 + 1e-9
    # the bracket is what the steps showed: its low edge passed, its high edge failed
    passed = [s["offered_qps"] for s in steps if s["ok"]]
    failed = [s["offered_qps"] for s in steps if not s["ok"]]
    assert max(passed) == knee["knee_low_qps"] == knee["within_slo_qps"]
    assert min(failed) == knee["knee_high_qps"]
    (fixed,) = row["fixed"]
    assert fixed["offered_qps"] == 2000 and fixed["latency_ms"]["p99"] is not None
    assert fixed["answered_qps"] == pytest.approx(2000, rel=0.1)
    names = {c["name"]: c["ok"] for c in result["criteria"]}
    assert names == {"capacity local": False, "p99 local @ 2000 q/s": True}
    env = result["environment"]
    assert env["machine_cpus"] >= 1 and env["kernel"] and env["version"] == "1.17"
    assert env["fd_limit"] is not None
    md = (out / "bench.md").read_text()
    assert "## Throughput at saturation" in md and "## Latency at fixed rates" in md
    html = (out / "bench.html").read_text()
    assert 'data-series="local p50"' in html
    assert json.loads((out / "bench.json").read_text())["id"] == result["id"]


def test_generator_bound_is_said_aloud(tmp_path: Path) -> None:
    """One builtin worker against a two-thread unbound: the generator is the limit."""
    # Far beyond what one worker sends (~0.3-0.4 M q/s here), so the rate is never kept
    # even on a faster machine, where 400k q/s was.
    rate_qps = 2_000_000
    bench = {**SHORT, "duration_s": 2, "rates_qps": [rate_qps], "fixed_duration_s": 2}
    scenario = unbound_scenario(tmp_path, threads=2, workers=1, bench=bench)
    out = tmp_path / "o"
    proc = soak_bench(str(scenario), "--classes", "local", "--no-knee", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "GENERATOR-BOUND" in proc.stdout
    row = json.loads((out / "bench.json").read_text())["classes"][0]
    (fixed,) = row["fixed"]
    assert fixed["limit"]["kind"] == "generator", fixed["limit"]
    assert "could not send" in fixed["limit"]["reason"]
    assert fixed["sent_qps"] < 0.97 * rate_qps
    # Flat out the label may be the generator, the machine's CPUs (busy with both, or
    # with others' work) or none, but never the server's two threads.
    limit = row["saturation"]["limit"]
    assert limit["kind"] != "server", limit


def test_dnsperf_engine_gives_the_same_shape(tmp_path: Path) -> None:
    if shutil.which("dnsperf") is None:
        pytest.skip("dnsperf is not installed")
    bench = {**SHORT, "knee": {"max_steps": 6}}
    scenario = unbound_scenario(tmp_path, threads=1, workers=1, bench=bench)
    out = tmp_path / "o"
    proc = soak_bench(
        str(scenario), "--engine", "dnsperf", "--classes", "local", "--runs", "1",
        "--duration", "1", "--throwaway", "0", "--rates", "2000", "--fixed-duration", "1",
        "--step", "1", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "bench.json").read_text())
    assert result["engine"] == "dnsperf" and result["environment"]["dnsperf"] != "?"
    (row,) = result["classes"]
    assert row["saturation"]["qps"]["median"] > 1000, proc.stdout
    assert row["knee"]["steps"] and row["knee"]["floor_p50_ms"] is not None, proc.stdout
    (fixed,) = row["fixed"]
    assert fixed["latency_ms"]["avg"] is not None and fixed["latency_ms"]["p99"] is None
    # one second of dnsperf -Q 2000 on a shared machine: the rate, give or take its start
    assert fixed["answered_qps"] == pytest.approx(2000, rel=0.25), proc.stdout


def test_bad_class_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    scenario = unbound_scenario(tmp_path, threads=1, workers=1, bench=SHORT)
    proc = soak_bench(str(scenario), "--classes", "nope", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no such class 'nope'" in lines[0]
    assert not (tmp_path / "o").exists()


REPO = Path(__file__).resolve().parents[2]


def soak_compare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SOAK, "compare", *args], capture_output=True, text=True, timeout=60)


def test_same_version_twice_compares_same(tmp_path: Path) -> None:
    """pdns-recursor (forwarding to dnsmasq) against itself, measured in turns.

    Five runs a side: with three, two series fall wholly apart by chance one time in
    ten, and a verdict then rests on the threshold alone."""
    out = tmp_path / "out"
    proc = soak_bench(
        str(REPO / "scenarios" / "pdns-recursor-dnsmasq.yaml"),
        "--classes", "cached", "--no-knee", "--runs", "5", "--duration", "1.5",
        "--throwaway", "0.5", "--rates", "", "--compare-set", "target.version=4.8-again",
        "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout
    cmp = json.loads((out / "compare.json").read_text())
    verdicts = {f["name"]: f["verdict"] for f in cmp["figures"]}
    assert "cached saturation q/s" in verdicts and "cached server CPU per query" in verdicts
    # Never better or worse; a side whose runs spread by more than 10 % is `erratic`.
    assert set(verdicts.values()) <= {"same", "erratic"}, proc.stdout
    for side in ("A", "B"):
        result = json.loads((out / side / "bench.json").read_text())
        assert result["id"].endswith(f"-{side}")
    assert json.loads((out / "B" / "bench.json").read_text())["target"]["version"] == "4.8-again"
    # `soak compare` on the two results gives the same answer
    again = soak_compare(str(out / "A"), str(out / "B" / "bench.json"), "--json")
    assert again.returncode == 0, again.stderr
    assert {f["name"]: f["verdict"] for f in json.loads(again.stdout)["figures"]} == verdicts


@pytest.mark.docker
def test_cpu_limited_target_has_lower_capacity_and_compares_worse(tmp_path: Path) -> None:
    if (reason := docker_skip_reason(["soak-test/unbound"])) is not None:
        pytest.skip(reason)
    scenario = {
        "name": "bench-unbound-docker",
        "target": {
            "runtime": "docker",
            "name": "unbound",
            "version": "1.17",
            "image": "soak-test/unbound",
            "ports": {"dns": {"container": 5300, "protocol": "both"}},
            "ready": {
                "probes": [{"kind": "dns", "name": "www.example.test.", "answer": "192.0.2.10"}]
            },
        },
        "load": bench_load(2),
        "phases": [{"name": "p", "duration_s": 10}],
        # Five runs a side: `worse` needs a significant difference (Holm-corrected
        # Welch p < 0.05) between sides whose runs vary by 10 % at most.
        "bench": {**SHORT, "runs": 5, "knee": {"enabled": False}},
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = tmp_path / "out"
    proc = soak_bench(
        str(path), "--compare-set", "target.cpus=0.05", "--compare-set", "target.version=cpus-0.05",
        "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "B worse: local saturation q/s" in proc.stderr.strip().splitlines()[-1]
    a = json.loads((out / "A" / "bench.json").read_text())["classes"][0]["saturation"]
    b = json.loads((out / "B" / "bench.json").read_text())["classes"][0]["saturation"]
    assert b["qps"]["high"] < a["qps"]["low"]  # every limited run below every free one
    assert b["target_cores"] < 0.1  # the quota held
    cmp = json.loads((out / "compare.json").read_text())
    verdicts = {f["name"]: f["verdict"] for f in cmp["figures"]}
    assert verdicts["local saturation q/s"] == "worse"
    # the other way round, the free target's throughput is better (its CPU per query
    # may well be worse: a throttled server answers in batches)
    back = soak_compare(str(out / "B"), str(out / "A"), "--json")
    assert back.returncode in (0, 1), back.stderr
    back_verdicts = {f["name"]: f["verdict"] for f in json.loads(back.stdout)["figures"]}
    assert back_verdicts["local saturation q/s"] == "better"
