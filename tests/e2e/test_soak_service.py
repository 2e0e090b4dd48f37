"""`soak serve` end to end: a submitted soak survives kill -9 of its target and a restart
of the service itself (resumed, with the gap recorded)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from soak.clock import NS_PER_S, ns_to_s
from tests.e2e.soakrun import (
    DEMO,
    QUICK,
    TOKEN,
    kinds,
    processes_under,
    run_soak,
    service,
    service_place,
    status,
    wait_for,
)
from tests.support.ledger import assert_figures_agree
from tests.support.procs import children, cmdline
from tests.support.servers import free_port

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def no_strays(tmp_path: Path) -> Iterator[None]:
    """These tests SIGKILL a service: if one fails before a later service ends the run,
    the run's targets and helpers are left without a parent. Stop whatever still runs
    from the test's directory, so that a failure does not leave servers behind."""
    yield
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and f"{tmp_path}/" in cmdline(int(proc.name)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), signal.SIGKILL)


def test_kill_target_and_restart_service_mid_run(tmp_path: Path) -> None:
    data, port, url = service_place(tmp_path)
    env = {"SOAK_TOKEN": TOKEN}
    with service(data, port):
        started = run_soak(
            "start", str(DEMO), "--duration", "50s", *QUICK, "--server", url,
            "--set", "criteria.leaks_ok=false", "--set", "criteria.restarts_max=1",
            # A kill -9 loses the queries in flight and stretches that tick's p99: allowed here.
            "--set", "criteria.lost_ratio_max=0.05", "--set", "criteria.p99_ms_max={}",
            "--set", "target.max_restarts=2",
            env=env,
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        run_id = started.stdout.strip()
        first = wait_for(
            lambda: (
                (s := status(port, run_id))["status"] == "running"
                and (s["elapsed_s"] or 0) > 8
                and s
            ),
            60.0,
            "the run has run 8 s",
        )
        old_pid = first["target_pid"]
        os.kill(old_pid, signal.SIGKILL)
        after_kill = wait_for(
            lambda: "restarted" in kinds(s := status(port, run_id)) and s, 30.0, "a restart"
        )
        exited = [e for e in after_kill["events"] if e["kind"] == "exited"]
        assert exited and "signal 9" in exited[0]["message"]
        assert after_kill["restarts"] == 1
        new_pid = after_kill["target_pid"]
        assert new_pid != old_pid
    # The service is gone (SIGTERM); the target, in its own session, is not.
    os.kill(new_pid, 0)
    time.sleep(2.0)
    with service(data, port):
        resumed = wait_for(
            lambda: "gap" in kinds(s := status(port, run_id)) and s, 20.0, "the gap event"
        )
        assert resumed["status"] == "running"
        gap = next(e for e in resumed["events"] if e["kind"] == "gap")
        assert gap["value"] >= 2.0
        assert resumed["target_pid"] == new_pid
        final = wait_for(
            lambda: (s := status(port, run_id))["status"] not in ("pending", "running") and s,
            90.0,
            "the run ends",
        )
        assert final["status"] == "passed", (final["message"], final["events"][-5:])
        restart_criterion = next(c for c in final["criteria"] if c["name"] == "restarts")
        assert restart_criterion["value"] == 1
        report = run_soak("report", run_id, "--format", "json", "--server", url, env=env)
        assert report.returncode == 0, report.stderr
        assert json.loads(report.stdout)["run"]["id"] == run_id
        # Ticks went on after the resume: samples on both sides of the gap.
        listed = run_soak("list", "--json", "--server", url, env=env)
        assert [r["id"] for r in json.loads(listed.stdout)] == [run_id]
    assert processes_under(data / "runs" / run_id) == []
    # A target killed and the service away for seconds: the figures still agree (the
    # queries in flight at the kill are lost, not dropped).
    assert_figures_agree(data, run_id, kept_up=False)


def test_service_sigkilled_mid_run_resumes_every_tick_once(tmp_path: Path) -> None:
    """SIGKILL of `soak serve` (no shutdown at all), then a new service on the same data:
    the run resumes with a `gap` event, its load workers did not outlive the old
    service, and every tick stored before the kill is in the store exactly once."""
    from soak.runs.state import StateStore
    from soak.sinks.sqlite import SqliteStore

    data, port, url = service_place(tmp_path)
    with service(data, port) as serve:
        started = run_soak(
            "start", str(DEMO), "--duration", "40s", *QUICK, "--server", url,
            "--set", "criteria.leaks_ok=false", "--set", "criteria.lost_ratio_max=0.05",
            "--set", "criteria.p99_ms_max={}",
            env={"SOAK_TOKEN": TOKEN},
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        run_id = started.stdout.strip()
        wait_for(
            lambda: (
                (s := status(port, run_id))["status"] == "running" and (s["elapsed_s"] or 0) > 8
            ),
            60.0,
            "the run has run 8 s",
        )
        workers = [pid for pid in children(serve.pid) if "soak.load" in cmdline(pid)]
        assert workers  # the load engine's worker processes (targets are children too)
        serve.kill()
        serve.wait(10)
        killed_ns = time.time_ns()
    # A worker whose parent is gone sees its control pipe closed and stops.
    wait_for(lambda: not [w for w in workers if alive(w)], 20.0, "the old load workers exit")
    time.sleep(2.0)
    with service(data, port):
        resumed = wait_for(
            lambda: "gap" in kinds(s := status(port, run_id)) and s, 20.0, "the gap event"
        )
        gap_s = next(e for e in resumed["events"] if e["kind"] == "gap")["value"]
        assert gap_s >= 2.0
        final = wait_for(
            lambda: (s := status(port, run_id))["status"] not in ("pending", "running") and s,
            90.0,
            "the run ends",
        )
    assert final["status"] == "passed", (final["message"], final["events"][-5:])
    record = StateStore(data / "state.db").get_run(run_id)
    assert record is not None and record.origin_ns is not None
    store = SqliteStore(data / "points.db")
    try:
        found = store.series(run_id, "process", "rss_anon_bytes")
    finally:
        store.close()
    assert found
    for tags, points in found:
        times = [t for t, _ in points]
        assert len(times) == len(set(times)), tags  # no tick twice
        before = [t for t in times if t < killed_ns]
        after = [t for t in times if t >= killed_ns]
        # Every tick from the first to the kill, 1 s apart: none lost but the one in flight.
        assert before[0] - record.origin_ns < 2 * 10**9, tags
        steps_ns = {b - a for a, b in itertools.pairwise(before)}
        assert steps_ns == {10**9}, tags
        assert killed_ns - before[-1] < 3 * NS_PER_S, tags
        # The hole in the store is the gap the event reports.
        assert after and abs(ns_to_s(after[0] - before[-1]) - gap_s) < 2.5, tags


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_bad_input_is_refused_at_submission_and_the_client_says_why(tmp_path: Path) -> None:
    """422 with the one line, printed by `soak start --server`, exit 2, no record; a
    client without the token names the fix; a service that is down is said so."""
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    scenario = tmp_path / "nonloop.yaml"
    scenario.write_text(
        "name: nonloop\n"
        "target: {runtime: process, host: 10.1.2.3, argv: [sleep, '600'], ports: {dns: {}}}\n"
        "phases: [{name: a, duration_s: 10s}]\n"
    )
    missing = tmp_path / "missing-binary.yaml"
    missing.write_text(
        "name: missing\n"
        "target: {runtime: process, argv: [no-such-dns-server], ports: {dns: {}}}\n"
        "phases: [{name: a, duration_s: 10s}]\n"
    )
    env = {"SOAK_TOKEN": TOKEN}
    no_token = {"SOAK_TOKEN": "", "SOAK_HOME": str(tmp_path / "client-home")}
    with service(data, port):
        for path, line in [
            (scenario, "soak: refusing to send to 10.1.2.3 (10.1.2.3): only loopback"),
            (missing, "soak: target: binary not found on PATH: no-such-dns-server"),
        ]:
            refused = run_soak("start", str(path), "--server", url, env=env)
            assert refused.returncode == 2, refused.stdout + refused.stderr
            assert refused.stderr.strip().startswith(line), refused.stderr
            assert len(refused.stderr.strip().splitlines()) == 1
            assert refused.stdout == ""
        listed = run_soak("list", "--server", url, env=env)
        assert listed.stdout.strip() == "no runs", listed.stdout
        assert not (data / "runs").exists() or not any((data / "runs").iterdir())
        tokenless = run_soak("list", "--server", url, env=no_token)
        assert tokenless.returncode == 2
        assert "--data-dir" in tokenless.stderr and "SOAK_TOKEN" in tokenless.stderr
    down = run_soak("list", "--server", url, env=no_token)
    assert down.returncode == 2
    assert down.stderr.startswith(f"soak: cannot reach the service at {url}"), down.stderr
