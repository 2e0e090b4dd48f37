"""A soak run captures its own target's client queries (`capture:`, dnstap from real
unbound), and the next run replays that file: the replay's queries, captured again,
hold the first capture's query-type mix and per-client counts."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dns.rdatatype
import pytest

from soak.runs.layout import DataDir
from soak.runs.state import StateStore
from soak.sinks.sqlite import SqliteStore
from soak.traffic.capture_file import Capture, read_capture
from tests.e2e.soakrun import QUICK, last_json, run_soak
from tests.support.ledger import assert_figures_agree
from tests.support.servers import DEFAULT_LOCAL_DATA, unbound_conf, unbound_process_target
from tests.support.skips import docker_skip_reason
from tests.support.traffic import dnstap_conf

pytestmark = pytest.mark.e2e

# One ledger class per query type, so that the ledger's classes and the capture's
# query types count the same thing.
MIX = [
    {"name": "A", "weight": 3, "queries": ["www.example.test A", "mail.example.test A"]},
    {"name": "AAAA", "weight": 2, "queries": ["www.example.test AAAA"]},
    {"name": "MX", "weight": 1, "queries": ["example.test MX"]},
]


@pytest.fixture
def data() -> Iterator[Path]:
    """A short data directory: the run's dnstap socket is in its run directory, and a
    unix socket's path holds at most 107 bytes (pytest's own paths can be longer)."""
    with tempfile.TemporaryDirectory(prefix="soak-cap-") as d:
        yield Path(d)


def dnstap_target() -> dict[str, object]:
    """unbound on a port soak picks, writing its client queries as dnstap to the run's
    socket (`{run_dir}/dnstap.sock`, where `capture:` listens by default)."""
    conf = unbound_conf("{port.dns}", DEFAULT_LOCAL_DATA)  # type: ignore[arg-type]
    conf += dnstap_conf(Path("{run_dir}/dnstap.sock"))
    target = unbound_process_target()
    target["files"] = [{"dest": "unbound.conf", "content": conf}]
    return target


def run(
    tmp: Path,
    data: Path,
    name: str,
    load: dict[str, Any],
    seconds: int,
    source: str = "dnstap",
) -> dict[str, Any]:
    """`source` pcap: tcpdump on loopback records an unbound that writes no dnstap."""
    scenario = {
        "name": name,
        "target": dnstap_target() if source == "dnstap" else unbound_process_target(),
        "phases": [{"name": "steady", "duration_s": f"{seconds}s"}],
        "load": load,
        "capture": {"clients_by_port": True, "source": source},
        # Seconds of unbound filling its caches are no leak verdict; the cores are shared.
        "criteria": {"leaks_ok": False, "p99_ms_max": {"all": 1000}},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(json.dumps(scenario))
    proc = run_soak("start", str(path), "--foreground", *QUICK, "--data-dir", str(data))
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    # The path a user copies into the next scenario is printed with the result.
    printed = [ln for ln in proc.stdout.splitlines() if ln.startswith("capture (")]
    assert len(printed) == 1, proc.stdout[-3000:]
    status = last_json(run_soak("status", "--data-dir", str(data), "--json", last_run(data)).stdout)
    assert printed[0].endswith(status["capture"]["file"]), (printed, status["capture"])
    return status


def replayed_file(data: Path, run_id: str) -> Path | None:
    """The capture file a run's record says it replayed (its `from_run` found)."""
    state = StateStore(DataDir(data).state_db)
    try:
        record = state.get_run(run_id)
    finally:
        state.close()
    assert record is not None and record.scenario.load is not None
    assert record.scenario.load.replay is not None
    return record.scenario.load.replay.file


def last_run(data: Path) -> str:
    return max((data / "runs").iterdir(), key=lambda p: p.stat().st_mtime).name


def qtypes(c: Capture) -> dict[str, int]:
    return dict(collections.Counter(dns.rdatatype.to_text(q.qtype) for q in c.queries))  # type: ignore[arg-type]


def per_client(c: Capture) -> list[int]:
    return sorted(collections.Counter(q.client for q in c.queries).values())


def sent_per_class(data: Path, run_id: str) -> dict[str, int]:
    store = SqliteStore(data / "points.db")
    try:
        out: dict[str, int] = {}
        for cls in ("A", "AAAA", "MX"):
            found = store.series(run_id, "load", "sent", {"class": cls})
            out[cls] = int(sum(float(v) for _, values in found for _, v in values))
        return out
    finally:
        store.close()


def recorded_as_sent(capture: Capture, data: Path, run_id: str) -> bool:
    """The capture holds the queries the run's load sent, per query type, and nothing
    else; True when exactly those (nothing lost). A query lost on its way (a busy machine
    can drop a UDP datagram on loopback) may be missing: then it holds at least every
    query answered."""
    ledger = assert_figures_agree(data, run_id)
    if ledger["lost"] == 0:
        assert qtypes(capture) == sent_per_class(data, run_id), ledger
        return True
    assert ledger["completed"] <= len(capture.queries) <= ledger["sent"], ledger
    return False


def test_run_captures_its_target_and_the_next_replays_it(tmp_path: Path, data: Path) -> None:
    # Run 1: the load's four UDP flows are the capture's four clients.
    load = {"rate_qps": 40, "flows": 4, "timeout_s": "1s", "mix": MIX}
    first = run(tmp_path, data, "cap", load, 8)
    info = first["capture"]
    capture = read_capture(Path(info["file"]))
    assert Path(info["file"]).parent == data / "runs" / first["id"]
    assert len(capture.queries) == info["queries"] and qtypes(capture) == info["qtypes"]
    # Every query the load sent, and nothing else: the readiness probe came before the
    # run's origin and is said to be left out.
    recorded_as_sent(capture, data, first["id"])
    assert len(capture.clients) == 4
    kinds = [e["kind"] for e in first["events"]]
    assert kinds.count("capture_listening") == kinds.count("capture_written") == 1, kinds
    assert "capture_connected" in kinds, kinds
    written = next(e["message"] for e in first["events"] if e["kind"] == "capture_written")
    assert "before the run's origin" in written, written

    # Run 2 replays that run's capture once (named by the run's id), and captures what
    # it sent: the first capture's query types and per-client counts again.
    replay = {"timeout_s": "1s", "replay": {"from_run": first["id"], "loops": 1}}
    second = run(tmp_path, data, "rep", replay, int(capture.duration_ns / 1e9) + 4)
    assert replayed_file(data, second["id"]) == Path(info["file"])
    again = read_capture(Path(second["capture"]["file"]))
    assert sum(sent_per_class(data, second["id"]).values()) == len(capture.queries)
    if recorded_as_sent(again, data, second["id"]):
        assert qtypes(again) == qtypes(capture)
        assert per_client(again) == per_client(capture)
        assert len(again.clients) == len(capture.clients)


@pytest.mark.skipif(os.geteuid() != 0, reason="tcpdump needs CAP_NET_RAW: run as root")
@pytest.mark.parametrize("protocol", ["udp", "tcp"])
def test_run_captures_its_target_with_tcpdump(tmp_path: Path, data: Path, protocol: str) -> None:
    """`capture.source: pcap`: a server that writes no dnstap, recorded by tcpdump on
    loopback (only what goes to it: a TCP stream is read from the client's side alone)
    from before the run's origin: every query the load sent, per type; over UDP its four
    flows are four clients, over TCP one client (an address) with its four connections.
    The pcap stays beside the capture."""
    load = {"rate_qps": 40, "flows": 4, "timeout_s": "1s", "mix": MIX, "protocol": protocol}
    status = run(tmp_path, data, f"pcap-{protocol}", load, 8, source="pcap")
    info = status["capture"]
    capture = read_capture(Path(info["file"]))
    assert len(capture.queries) == info["queries"] and qtypes(capture) == info["qtypes"]
    recorded_as_sent(capture, data, status["id"])
    assert info["transports"] == {protocol: len(capture.queries)}
    if protocol == "udp":
        assert len(capture.clients) == 4
    else:
        assert len(capture.clients) == 1
        assert len({q.conn for q in capture.queries}) == 4
    events = {e["kind"]: e["message"] for e in status["events"]}
    assert "tcpdump on lo to 127.0.0.1:" in events["capture_listening"], events
    assert "capture_written" in events and "capture_failed" not in events, events
    assert (data / "runs" / status["id"] / "capture.pcap").stat().st_size > 0


@pytest.mark.skipif(os.geteuid() != 0, reason="tcpdump needs CAP_NET_RAW: run as root")
def test_a_tcpdump_that_cannot_listen_ends_the_run_at_its_start(tmp_path: Path, data: Path) -> None:
    """tcpdump refusing (here: no such interface; without CAP_NET_RAW the same way) ends
    the run `error` before its load, exit 2, with tcpdump's own line; the target stopped."""
    scenario = {
        "name": "pcap-bad",
        "target": unbound_process_target(),
        "phases": [{"name": "steady", "duration_s": "5s"}],
        "load": {"rate_qps": 10, "mix": MIX},
        "capture": {"source": "pcap", "interface": "soak-none0"},
    }
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(scenario))
    proc = run_soak("start", str(path), "--foreground", *QUICK, "--data-dir", str(data))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "capture: tcpdump on soak-none0 to 127.0.0.1:" in proc.stderr, proc.stderr[-2000:]
    assert "No such device" in proc.stderr.splitlines()[-1], proc.stderr[-2000:]
    status = last_json(run_soak("status", "--data-dir", str(data), "--json", last_run(data)).stdout)
    assert status["status"] == "error", status
    assert not any(e["kind"] == "capture_written" for e in status["events"])
    run_dir = data / "runs" / status["id"]
    found = subprocess.run(["pgrep", "-f", str(run_dir)], capture_output=True, text=True)
    assert found.stdout == "", found.stdout  # the target started for it is stopped


def container_tap_target() -> dict[str, object]:
    """soak-test/unbound (its server runs as the image's `unbound` user) writing dnstap to
    /run/tap/dnstap.sock, a bind mount of the run's `tap` directory, where soak listens."""
    conf = unbound_conf(5300, DEFAULT_LOCAL_DATA).replace("127.0.0.1@5300", "0.0.0.0@5300")
    conf = conf.replace("access-control: 127.0.0.0/8 allow", "access-control: 0.0.0.0/0 allow")
    conf += dnstap_conf(Path("/run/tap/dnstap.sock"))
    return {
        "name": "unbound",
        "runtime": "docker",
        "image": "soak-test/unbound:latest",
        "ports": {"dns": {"container": 5300, "protocol": "both"}},
        "files": [{"dest": "unbound.conf", "content": conf}],
        "mounts": [
            {"source": "{run_dir}/unbound.conf", "target": "/etc/unbound/soak.conf"},
            {"source": "{run_dir}/tap", "target": "/run/tap"},
        ],
        "ready": {"probes": [{"kind": "dns", "name": "www.example.test"}]},
    }


def test_a_container_target_writes_its_dnstap_through_a_mount(tmp_path: Path, data: Path) -> None:
    """A container's server, running as its own user, reaches the socket in the run's
    `tap` directory through a bind mount (soak makes that directory passable by others):
    every query the load sent is in the capture."""
    if (reason := docker_skip_reason(["soak-test/unbound:latest"])) is not None:
        pytest.skip(reason)
    scenario = {
        "name": "ctap",
        "target": container_tap_target(),
        "phases": [{"name": "steady", "duration_s": "8s"}],
        "load": {"rate_qps": 40, "flows": 4, "timeout_s": "1s", "mix": MIX},
        "capture": {"socket": "{run_dir}/tap/dnstap.sock", "clients_by_port": True},
        "criteria": {"leaks_ok": False, "p99_ms_max": {"all": 1000}},
    }
    path = tmp_path / "ctap.yaml"
    path.write_text(json.dumps(scenario))
    proc = run_soak("start", str(path), "--foreground", *QUICK, "--data-dir", str(data))
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    status = last_json(run_soak("status", "--data-dir", str(data), "--json", last_run(data)).stdout)
    kinds = [e["kind"] for e in status["events"]]
    assert "capture_connected" in kinds and "capture_written" in kinds, status["events"]
    capture = read_capture(Path(status["capture"]["file"]))
    recorded_as_sent(capture, data, status["id"])
