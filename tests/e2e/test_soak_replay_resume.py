"""A service's replay run resumed after the service was killed: the replay goes on at
the run's place in its plan (its loop, its rewritten names), not from loop 0."""

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

from soak.clock import NS_PER_S
from soak.load.replay_config import ReplayConfig
from soak.load.replay_plan import Plan
from soak.runs.state import StateStore
from soak.traffic.capture import UDP, Capture, Query, qname_text, write_capture
from tests.e2e.soakrun import QUICK, TOKEN, kinds, run_soak, service, service_place, status
from tests.support.ledger import assert_figures_agree
from tests.support.procs import cmdline
from tests.support.servers import unbound_conf
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

RUN_S = 30
SEED = 7
REWRITE = {"zones": ["example.test"], "from_loop": 0}
WIRE = [b"\x01a\x04test\x00", b"\x01b\x04test\x00", b"\x01c\x04test\x00", b"\x01d\x04test\x00"]


@pytest.fixture(autouse=True)
def no_strays(tmp_path: Path) -> Iterator[None]:
    """The test SIGKILLs a service: stop whatever still runs from its directory."""
    yield
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and f"{tmp_path}/" in cmdline(int(proc.name)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), signal.SIGKILL)


def capture() -> Capture:
    """One client, four names 250 ms apart: a loop lasts 1 s, and each loop's names are
    fresh (rewritten under example.test), so a name the server saw tells its loop."""
    queries = [Query(k * 250_000_000, 0, 0, 0x0100, 1, UDP, name) for k, name in enumerate(WIRE)]
    return Capture("test", ["10.0.0.1"], queries)


def logging_unbound(log: Path) -> dict[str, object]:
    """unbound as the run's target, logging every query it receives (`log-queries`)."""
    conf = unbound_conf("{port.dns}", ["www.example.test. 3600 IN A 192.0.2.10"])  # type: ignore[arg-type]
    conf = conf.replace('logfile: ""', f'logfile: "{log}"\n    log-queries: yes')
    return {
        "runtime": "process",
        "name": "unbound",
        "version": "1.17",
        "argv": ["unbound", "-d", "-c", "{run_dir}/unbound.conf"],
        "ports": {"dns": {"protocol": "both"}},
        "files": [{"dest": "unbound.conf", "content": conf}],
        "ready": {"probes": [{"kind": "dns", "name": "www.example.test"}]},
    }


def test_resumed_replay_continues_its_loops(tmp_path: Path) -> None:
    write_capture(tmp_path / "c.soakcap", capture())
    log = tmp_path / "queries.log"
    scenario = {
        "name": "replay-resume",
        "target": logging_unbound(log),
        "phases": [{"name": "steady", "duration_s": f"{RUN_S}s"}],
        "load": {
            "timeout_s": "1s",
            "seed": SEED,
            "replay": {"file": str(tmp_path / "c.soakcap"), "rewrite": REWRITE},
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
        wait_for(
            lambda: (
                (s := status(port, run_id))["status"] == "running" and (s["elapsed_s"] or 0) > 6
            ),
            60.0,
            "the run has run 6 s",
        )
        serve.kill()
        serve.wait(10)
    time.sleep(3.0)  # the service is away for more than a loop
    with service(data, port):
        wait_for(lambda: "gap" in kinds(status(port, run_id)), 30.0, "the gap event")
        final = wait_for(
            lambda: (s := status(port, run_id))["status"] not in ("pending", "running") and s,
            90.0,
            "the run ends",
        )
    assert final["status"] == "passed", (final["message"], final["events"][-5:])
    record = StateStore(data / "state.db").get_run(run_id)
    assert record is not None and record.origin_ns is not None
    # Each name the server received, its loop (from the plan: a loop's names are its own)
    plan = Plan(ReplayConfig(file=tmp_path / "c.soakcap", rewrite=REWRITE), capture(), SEED)
    loop_of = {qname_text(p.question[:-4]): p.loop for p in plan.queries(2 * RUN_S * NS_PER_S)}
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
    assert_figures_agree(data, run_id)
