"""`soak serve` end to end: a submitted soak survives kill -9 of its target and a restart
of the service itself (resumed, with the gap recorded; a replay goes on at its place
in the plan)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from soak.clock import NS_PER_S, ns_to_s
from soak.load.replay import Plan
from soak.runs.away import AWAY_EVENT
from soak.runs.state import StateStore
from soak.traffic.capture_file import UDP, Capture, Query, qname_text, write_capture
from soak.traffic.replay_config import ReplayConfig
from tests.e2e.soakrun import (
    DEMO,
    QUICK,
    TOKEN,
    ends_passed,
    kinds,
    processes_under,
    ran_for,
    run_soak,
    service,
    service_place,
    status,
    wait_for,
)
from tests.support.audit_runs import result_of
from tests.support.ledger import assert_figures_agree
from tests.support.procs import children, cmdline
from tests.support.servers import free_port, unbound_conf, unbound_process_target

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
        # The seconds the service was away were due and not sent: the generator may
        # fall short for that cause alone (the SIGKILLed service's test below).
        final = ends_passed(port, run_id, unless=("generator",))
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
        ran_for(port, run_id, 8)
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
        # The seconds the service was away were due and nobody sent them: the generator
        # fell short of the schedule for that cause, and nothing else failed.
        final = ends_passed(port, run_id, unless=("generator",))
    (away,) = [e for e in final["events"] if e["kind"] == AWAY_EVENT]
    assert away["message"].startswith(f"service away for {gap_s:.1f} s: "), away
    generator = next(c for c in final["criteria"] if c["name"] == "generator")
    assert not generator["ok"] and generator["message"].startswith("service away for ")
    # Every second of the run is due (the schedule a witness of the ledger): what was
    # never sent is skipped, the outage's seconds among them, and the audit is clean.
    ledger = assert_figures_agree(data, run_id, kept_up=False)
    assert ledger["skipped"] >= 300 * (int(gap_s) - 1), ledger  # the steady phase's rate
    assert generator["value"] <= 1 - (int(gap_s) - 1) / 40  # the outage, of 40 s at most
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


REPLAY_RUN_S = 30
REPLAY_SEED = 7
REPLAY_REWRITE = {"zones": ["example.test"], "from_loop": 0}
REPLAY_NAMES = [
    b"\x01a\x04test\x00",
    b"\x01b\x04test\x00",
    b"\x01c\x04test\x00",
    b"\x01d\x04test\x00",
]


def replay_capture() -> Capture:
    """One client, four names 250 ms apart: a loop lasts 1 s, and each loop's names are
    fresh (rewritten under example.test), so a name the server saw tells its loop."""
    queries = [
        Query(k * 250_000_000, 0, 0, 0x0100, 1, UDP, name) for k, name in enumerate(REPLAY_NAMES)
    ]
    return Capture("test", ["10.0.0.1"], queries)


def logging_unbound(log: Path) -> dict[str, object]:
    """unbound as the run's target, logging every query it receives (`log-queries`)."""
    conf = unbound_conf("{port.dns}", ["www.example.test. 3600 IN A 192.0.2.10"])  # type: ignore[arg-type]
    return unbound_process_target(
        conf=conf.replace('logfile: ""', f'logfile: "{log}"\n    log-queries: yes')
    )


def test_resumed_replay_continues_its_loops(tmp_path: Path) -> None:
    write_capture(tmp_path / "c.soakcap", replay_capture())
    log = tmp_path / "queries.log"
    scenario = {
        "name": "replay-resume",
        "target": logging_unbound(log),
        "phases": [{"name": "steady", "duration_s": f"{REPLAY_RUN_S}s"}],
        "load": {
            "timeout_s": "1s",
            "seed": REPLAY_SEED,
            "replay": {"file": str(tmp_path / "c.soakcap"), "rewrite": REPLAY_REWRITE},
        },
        "criteria": {"leaks_ok": False, "p99_ms_max": {}},
    }
    path = tmp_path / "resume.yaml"
    path.write_text(json.dumps(scenario))
    data, port, url = service_place(tmp_path)
    with service(data, port) as serve:
        started = run_soak("start", str(path), *QUICK, "--server", url, env={"SOAK_TOKEN": TOKEN})
        assert started.returncode == 0, started.stderr
        run_id = started.stdout.strip()
        ran_for(port, run_id, 6)
        serve.kill()
        serve.wait(10)
    time.sleep(3.0)  # the service is away for more than a loop
    with service(data, port):
        wait_for(lambda: "gap" in kinds(status(port, run_id)), 30.0, "the gap event")
        # the replay plays in a thread of the run's process: on a machine whose cores
        # are taken it may miss the capture's timing, and the run then says so
        ends_passed(port, run_id, unless=("generator",))
    record = StateStore(data / "state.db").get_run(run_id)
    assert record is not None and record.origin_ns is not None
    # Each name the server received, its loop (from the plan: a loop's names are its own)
    cfg = ReplayConfig(file=tmp_path / "c.soakcap", rewrite=REPLAY_REWRITE)  # type: ignore[arg-type]
    plan = Plan(cfg, replay_capture(), REPLAY_SEED)
    loop_of = {
        qname_text(p.question[:-4]): p.loop for p in plan.queries(2 * REPLAY_RUN_S * NS_PER_S)
    }
    received = [
        (int(at), loop_of[name])
        for at, name in re.findall(
            r"^\[(\d+)\] unbound\[\S+\] info: 127\.0\.0\.1 (\S+) A IN", log.read_text(), re.M
        )
        if name in loop_of
    ]
    assert received, log.read_text()[-2000:]
    # The service's absence is the longest silence; the loops go on across it, as the
    # run's clock does: the first after it is the loop of its second of the run.
    (before_s, last_loop), (after_s, first_loop) = max(
        itertools.pairwise(received), key=lambda pair: pair[1][0] - pair[0][0]
    )
    assert after_s - before_s >= 3, received
    assert first_loop > last_loop + 1 and first_loop > 0, (last_loop, first_loop)
    since_origin_s = after_s - record.origin_ns // NS_PER_S  # a loop lasts 1 s here
    assert abs(first_loop - since_origin_s) <= 1, (first_loop, since_origin_s)
    loops = [loop for _, loop in received]
    assert loops == sorted(loops)  # never back to an earlier loop's names
    assert_figures_agree(data, run_id, kept_up=False)  # generator-bound: skips
    # ... and its windows from the resumed replay's start were held to its sockets' counts
    counters = result_of(data, run_id)[1]["load_totals"]["engine_counters"]
    assert counters["from_ns"] > record.origin_ns and counters["socket_sent"] > 0, counters


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
