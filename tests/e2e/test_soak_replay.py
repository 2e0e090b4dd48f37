"""`soak start --foreground` with `load.replay`: a capture replayed against unbound is the
run's load, counted in the same ledger as the workers' load."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import dns.rdatatype
import pytest

from soak.clock import NS_PER_S
from soak.load.replay import BOUND_P99_US, Plan
from soak.results.reportinput import local_witness_lines
from soak.runs.layout import DataDir
from soak.sinks.sqlite import SqliteStore
from soak.traffic.capture_file import TCP, UDP, Capture, Query
from soak.traffic.replay_config import ReplayConfig
from tests.e2e.soakrun import QUICK, last_json, run_soak
from tests.support.audit_runs import corrupted, result_of
from tests.support.ledger import assert_figures_agree
from tests.support.soaks import replay_scenario

pytestmark = pytest.mark.e2e

RUN_S = 20


def wire_name(name: str) -> bytes:
    return b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"


def small_capture() -> Capture:
    """Three clients (one over TCP), six queries in 0.9 s, every name one that the
    target answers from its own zone."""
    www, mail = wire_name("www.example.test"), wire_name("mail.example.test")
    queries = [
        Query(0, 0, 0, 0x0100, 1, UDP, www),
        Query(150_000_000, 1, 0, 0x0100, 1, UDP, mail),
        Query(300_000_000, 2, 0, 0x0100, 1, TCP, www),
        Query(450_000_000, 0, 0, 0x0100, 28, UDP, www),
        Query(600_000_000, 2, 0, 0x0100, 1, TCP, mail),
        Query(900_000_000, 1, 0, 0x0100, 1, UDP, www),
    ]
    return Capture("test", ["10.0.0.1", "10.0.0.2", "10.0.0.3"], queries)


def test_soak_run_replays_a_capture(tmp_path: Path) -> None:
    capture = small_capture()
    phases = [
        {"name": "warmup", "duration_s": "4s", "warmup": True},
        {"name": "steady", "duration_s": f"{RUN_S - 4}s"},
    ]
    # 20 s of unbound filling its caches is no leak verdict; the cores are shared.
    criteria = {"leaks_ok": False, "p99_ms_max": {"all": 1000}}
    path = replay_scenario(tmp_path, capture, "replay-soak", phases, criteria, speed="2x")
    data = tmp_path / "data"
    status = soak_ends(path, data)
    # Every figure the run reports agrees with its ledger, to the query.
    ledger = assert_figures_agree(data, status["id"])
    # The run's windows hold the capture's queries, loop after loop: all that were due
    # before the run's end, but for the loop in progress when the load stopped.
    plan = Plan(ReplayConfig(file=tmp_path / "c.soakcap", speed=2.0), capture, 0)
    planned = collections.Counter(plan.classes.names[q.cls] for q in plan.queries(RUN_S * NS_PER_S))
    per_loop = collections.Counter(dns.rdatatype.to_text(q.qtype) for q in capture.queries)
    assert set(planned) == {"A", "AAAA"}  # a class per query type
    store = SqliteStore(data / "points.db")
    try:
        for cls, due in planned.items():
            counts = {
                field: class_sum(store, status["id"], field, cls)
                for field in ("due", "sent", "completed", "lost")
            }
            assert due - per_loop[cls] <= counts["due"] <= due, (cls, due, counts)
            # every query left; each is answered or counted lost (a busy machine can lose
            # one UDP query on loopback: 36 of 37 answered beside two CPU hogs)
            assert counts["due"] == counts["sent"] == counts["completed"] + counts["lost"]
            assert counts["completed"] >= 0.9 * counts["sent"], (cls, counts)
        offsets = send_offsets(store, status["id"])
        conns = {
            field: class_sum(store, status["id"], field, "all")
            for field in ("conn_opened", "conn_reused", "conn_idled_out", "conn_errors")
        }
    finally:
        store.close()
    # The TCP client's connections, window by window: each loop (new clients, as
    # rename_clients asks) opens one for its first TCP query and reuses it for its
    # second; none idles out (10 s) before the next loop retires it.
    planned_tcp = sum(1 for q in plan.queries(RUN_S * NS_PER_S) if q.transport == TCP)
    assert conns["conn_errors"] == 0 and conns["conn_idled_out"] == 0, conns
    assert conns["conn_opened"] - 1 <= conns["conn_reused"] <= conns["conn_opened"], conns
    sent_tcp = conns["conn_opened"] + conns["conn_reused"]
    assert planned_tcp - 2 <= sent_tcp <= planned_tcp, (planned_tcp, conns)
    # The replay's fidelity: each window's send offsets, on its `all` point.
    assert len(offsets) >= RUN_S - 4, offsets
    for at_ns, (p50, p99, most) in offsets.items():
        assert 0 <= p50 <= p99 <= most, (at_ns, p50, p99, most)
    # A window that missed the capture's timing is said aloud, once, as an event.
    missed = [p99 for _, p99, _ in offsets.values() if p99 > BOUND_P99_US]
    bound = [e["message"] for e in status["events"] if e["kind"] == "generator_bound"]
    assert len(bound) == (1 if missed else 0), (missed, bound)
    # ... and in the report's phases, the JSON and the text alike.
    report = json.loads(Path(status["reports"]["json"]).read_text())
    steady = report["phases"][-1]["metrics"]["send_offset_p99_us"]
    assert steady["max"] == max(p99 for _, p99, _ in offsets.values() if p99 <= steady["max"])
    assert "Replay send offset p99, µs" in Path(status["reports"]["md"]).read_text()
    assert report["phases"][-1]["metrics"]["conn_opened"] >= 1
    assert "Replay connections opened" in Path(status["reports"]["md"]).read_text()
    # Each phase names the replay's pace, not a load rate the replay does not use.
    phases = [e["message"] for e in status["events"] if e["kind"] == "phase"]
    assert phases and all(m.endswith("(replay at 2x)") for m in phases), phases
    total = sum(planned.values())
    assert total - len(capture.queries) <= ledger["due"] <= total, (total, ledger)
    assert ledger["due"] == ledger["sent"] == ledger["completed"] + ledger["lost"], ledger
    # The replay's sockets witnessed the ledger (assert_figures_agree's audit held it to
    # them): every query taken whole by its socket, as many answers read as completed.
    run = (data, status["id"])
    counters = result_of(*run)[1]["load_totals"]["engine_counters"]
    assert counters["socket_sent"] == ledger["sent"] and counters["send_failed"] == 0, counters
    assert counters["socket_received"] >= ledger["completed"], counters
    said = local_witness_lines(DataDir(data), status["id"])[0]  # what `soak audit` prints
    assert said.startswith(f"the engine's sockets took {ledger['sent']:,.0f} queries"), said
    # ... and a replay's count changed in result.json is named by the audit.
    assert any(line.startswith("the ledger's sent") for line in corrupted(run, fewer_taken))
    # The setup table says the replay's clients and the loops it played: the ledger's due
    # over a loop's queries, a fraction where the run ended mid-loop.
    loops = round(ledger["due"] / len(capture.queries), 2)
    shown = report["setup"]["load"]
    assert f": {len(capture.clients)} clients, {loops:g} loop" in shown, (shown, loops)
    assert f" of {len(capture.queries)} queries" in shown, shown


def fewer_taken(data: Path, run_id: str) -> None:
    path, result = result_of(data, run_id)
    result["load_totals"]["engine_counters"]["socket_sent"] -= 1
    path.write_text(json.dumps(result))


def soak_ends(scenario: Path, data: Path, stderr: list[str] | None = None) -> dict[str, Any]:
    """The run's status: passed, or failed by the generator criterion alone (the replay
    plays in a thread of the run's process; on a machine whose cores are taken it can
    miss the capture's timing, and the run must then say so rather than pass). The run's
    stderr appended to `stderr` if given."""
    proc = run_soak(
        "start", str(scenario), "--foreground", "--duration", f"{RUN_S}s", *QUICK,
        "--data-dir", str(data), "--json",
    )  # fmt: skip
    if stderr is not None:
        stderr.append(proc.stderr)
    status: dict[str, Any] = last_json(proc.stdout)
    if proc.returncode == 0:
        assert status["status"] == "passed", status["message"]
        return status
    (result_file,) = (data / "runs").glob("*/result.json")
    failed = [c for c in json.loads(result_file.read_text())["criteria"] if not c["ok"]]
    assert [c["name"] for c in failed] == ["generator"], proc.stderr[-3000:]
    assert "send offset p99" in failed[0]["message"], failed
    return status


def class_sum(store: SqliteStore, run_id: str, field: str, cls: str) -> float:
    """A `load` field summed over the run's windows of one class."""
    found = store.series(run_id, "load", field, {"class": cls})
    return sum(float(v) for _, values in found for _, v in values)


def send_offsets(store: SqliteStore, run_id: str) -> dict[int, tuple[float, ...]]:
    """Per stored `all` point: its send offsets' p50, p99 and max (µs)."""
    found: dict[int, list[float]] = collections.defaultdict(list)
    for q in ("p50", "p99", "max"):
        for _, values in store.series(run_id, "load", f"send_offset_{q}_us", {"class": "all"}):
            for at_ns, v in values:
                found[at_ns].append(float(v))
    return {at_ns: tuple(v) for at_ns, v in found.items() if len(v) == 3}


def test_soak_run_replays_over_tcp_in_the_compiled_loop(tmp_path: Path) -> None:
    """`transport: tcp`: every client over TCP, played by the compiled stream loop in the
    replay's process; its windows carry the connections as they grow (each loop's three
    clients a connection each, opened for its first query and reused for its second),
    and every figure agrees with the ledger."""
    phases = [{"name": "steady", "duration_s": "10s"}]
    criteria = {"leaks_ok": False, "p99_ms_max": {"all": 1000}}
    path = replay_scenario(
        tmp_path, small_capture(), "replay-tcp", phases, criteria, speed="2x", transport="tcp"
    )
    data = tmp_path / "data"
    said: list[str] = []
    status = soak_ends(path, data, said)
    assert "replay in the Python loop" not in said[0], said[0][-2000:]
    ledger = assert_figures_agree(data, status["id"])
    store = SqliteStore(data / "points.db")
    try:
        fields = ("sent", "conn_opened", "conn_reused", "conn_idled_out", "conn_errors")
        got = {field: class_sum(store, status["id"], field, "all") for field in fields}
    finally:
        store.close()
    assert got["conn_errors"] == got["conn_idled_out"] == 0, got
    assert got["conn_opened"] + got["conn_reused"] == got["sent"] == ledger["sent"] > 0, got
    assert got["conn_opened"] - 3 <= got["conn_reused"] <= got["conn_opened"], got
