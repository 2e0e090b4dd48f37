"""What a pipeline reads of a run's outcome, against a real unbound: `soak start --wait`
and `soak status RUN` exit as `soak start --foreground` does (0 passed, 1 failed, 1 not
judged, 2 a target that never got ready), and a target that never got ready is reported as such
(every criterion `not judged`, the command as it was given, no plots to point to)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.soakrun import (
    TOKEN,
    last_json,
    processes_under,
    run_soak,
    service,
    service_place,
    wait_for,
)
from tests.support.ledger import assert_figures_agree
from tests.support.servers import unbound_process_target

pytestmark = pytest.mark.e2e

UNBOUND_ARGV = ["unbound", "-d", "-c", "{run_dir}/unbound.conf"]
# An option unbound does not know: it prints its usage and exits 1 before it is ready.
NEVER_READY_ARGV = ["unbound", "-d", "-Z", "-c", "{run_dir}/unbound.conf", "-p", "{port.dns}"]


def unbound_scenario(
    tmp: Path, argv: list[str], p99_ms: float = 1000.0, leaks_ok: bool = False
) -> Path:
    """`leaks_ok`: with leak criteria, which 6.5 s cannot judge (not one 10-min window)."""
    target = unbound_process_target() | {"argv": argv, "version_command": ["unbound", "-V"]}
    scenario: dict[str, Any] = {
        "name": "outcomes",
        "target": target,
        "load": {
            "rate_qps": "200 q/s",
            "mix": [{"name": "local", "queries": ["www.example.test A"]}],
        },
        "phases": [
            {"name": "warm", "duration_s": "1.5s", "warmup": True},
            {"name": "steady", "duration_s": "5s"},
        ],
        "samplers": {"interval_s": 1},
        "criteria": {
            "lost_ratio_max": 0.5,
            "p99_ms_max": {"all": p99_ms},
            "restarts_max": 0,
            "window_s": "2s",
            "leaks_ok": leaks_ok,
        },
    }
    path = tmp / f"outcomes-{len(list(tmp.glob('outcomes-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def test_wait_and_status_exit_by_the_outcome(tmp_path: Path) -> None:
    data, port, url = service_place(tmp_path)
    env = {"SOAK_TOKEN": TOKEN}
    cases = [
        ("passed", 0, unbound_scenario(tmp_path, UNBOUND_ARGV)),
        ("failed", 1, unbound_scenario(tmp_path, UNBOUND_ARGV, p99_ms=0.000001)),
        ("not_judged", 1, unbound_scenario(tmp_path, UNBOUND_ARGV, leaks_ok=True)),
        ("error", 2, unbound_scenario(tmp_path, NEVER_READY_ARGV)),
    ]
    with service(data, port):
        idle = run_soak("status", "--server", url, env=env)
        assert idle.returncode == 0 and idle.stdout.strip().startswith("no active runs"), idle
        for outcome, code, path in cases:
            waited = run_soak("start", str(path), "--wait", "--server", url, env=env)
            assert waited.returncode == code, (outcome, waited.stdout, waited.stderr[-2000:])
            run_id, result_line = waited.stdout.strip().splitlines()[-2:]
            assert result_line.startswith(f"result: {outcome}: "), waited.stdout
            if outcome == "failed":  # over the run and in its worst window: one criterion
                assert result_line.startswith("result: failed: 1 of "), result_line
                assert result_line.endswith(" criteria failed: p99_ms[all]"), result_line
            if outcome == "not_judged":  # named, and why
                assert result_line.startswith("result: not_judged: NOT JUDGED: "), result_line
                assert "leak[rss_anon_bytes]" in result_line, result_line
                assert "(no samples: no complete leak window" in result_line, result_line
            ended_line = f"soak: run {run_id} ended {outcome}"
            assert waited.stderr.strip().endswith(ended_line) == (code != 0), waited.stderr
            told = run_soak("status", run_id, "--server", url, env=env)
            assert told.returncode == code, (outcome, told.stdout, told.stderr)
            assert told.stderr.strip() == (ended_line if code else ""), told.stderr
            as_json = run_soak("status", run_id, "--server", url, "--json", env=env)
            assert json.loads(as_json.stdout)["status"] == outcome
            assert as_json.returncode == code
            if outcome != "error":  # a run with load: its figures agree with its ledger
                assert_figures_agree(data, run_id, kept_up=False)
        ended = run_soak("status", "--server", url, env=env)
        assert ended.stdout.strip() == "no active runs (4 ended: soak list shows them)"
        assert ended.returncode == 0
        # --json of `start --wait` is the ended run's status: a passing run, shortened (its
        # outcome and exit code are asserted above at full length).
        waited = run_soak(
            "start", str(cases[0][2]), "--wait", "--json", "--duration", "2s",
            "--server", url, env=env,
        )  # fmt: skip
        assert waited.returncode == 0 and last_json(waited.stdout)["status"] == "passed"
    assert processes_under(data / "runs") == []


def test_a_target_that_never_got_ready_is_reported_as_such(tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = unbound_scenario(tmp_path, NEVER_READY_ARGV)
    started = run_soak("start", str(path), "--foreground", "--data-dir", str(data))
    assert started.returncode == 2, started.stderr
    (run_id,) = [p.name for p in (data / "runs").iterdir()]
    told = run_soak("status", run_id, "--data-dir", str(data))
    assert told.returncode == 2 and told.stderr.strip() == f"soak: run {run_id} ended error"
    md = run_soak("report", run_id, "--format", "md", "--data-dir", str(data))
    assert md.returncode == 0, md.stderr
    text = md.stdout
    nothing_ran = "**ERROR before the target got ready — nothing ran: 4 criteria not judged: "
    assert nothing_ran in text and "(not judged: the target never got ready" in text
    criteria = [
        ln
        for ln in text.splitlines()
        if ln.startswith(("| lost_ratio", "| p99", "| wrong", "| restarts"))
    ]
    assert len(criteria) == 4 and all("| not judged |" in ln for ln in criteria), criteria
    assert "FAIL" not in text
    assert "Plots over time" not in text
    # The command as it was given: the port soak chose, the run directory.
    runs_as = next(ln for ln in text.splitlines() if ln.startswith("| Runs as |"))
    assert "{port.dns}" not in runs_as and "{run_dir}" not in runs_as, runs_as
    assert f"{data}/runs/{run_id}/unbound.conf" in runs_as
    # It was asked for (version_command), but only a ready target is asked.
    assert "| Version reported | not read: the target never got ready" in text
    assert processes_under(data / "runs") == []


def test_compare_after_prune_is_exit_2_with_the_reason(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ran = run_soak(
        "start", str(unbound_scenario(tmp_path, UNBOUND_ARGV)), "--foreground", "--json",
        "--data-dir", str(data),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    run_id = last_json(ran.stdout)["id"]
    same = run_soak("compare", run_id, run_id, "--data-dir", str(data))
    assert same.returncode == 0, same.stderr
    prune = ["prune", "--older-than", "0.5s", "--data-dir", str(data)]

    def old_enough() -> bool:
        said = run_soak(*prune, "--dry-run").stdout
        return said.startswith("would remove the points of the runs older than 0.5 seconds: 1 run")

    wait_for(old_enough, 30.0, "the run's newest sample is older than 0.5 s")
    assert run_soak(*prune).returncode == 0
    after = run_soak("compare", run_id, run_id, "--data-dir", str(data))
    assert after.returncode == 2, after.stdout
    assert after.stderr.startswith(f"soak: {run_id}: its points were removed by soak prune (")
    assert after.stdout == ""
