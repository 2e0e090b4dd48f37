"""A server given by name (`localhost`) on the compiled TCP, DoT and DoH loops, against
real unbound on loopback: the compiled loop runs (no fallback line on stderr), every
query is answered, and the connections are those the same run opens to 127.0.0.1. And
a name whose address changes mid-run: the compiled engine, kept current by
target.Target as the worker's driver keeps it, connects to the new address, and counts
a connection error per connect while the name resolves to nothing.

The moving name is resolved by a resolver function handed to Target (a name that a
resolver here would answer differently mid-run needs /etc/hosts or the machine's
resolver changed); the engine, its connects and the server are real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soak.load import doh_fast, stream_fast
from soak.load.conn import Policy
from soak.load.load_config import LoadConfig
from soak.load.oneshot import run_load
from soak.load.queries import ClassQueries
from soak.load.target import Target
from soak.load.worker import WorkerSpec, monotonic_ns
from tests.support.ledger import assert_every_query_answered
from tests.support.servers import ServerProc
from tests.support.tls import SERVER_NAME

pytestmark = pytest.mark.integration

LOCAL = [{"name": "local", "queries": ["www.example.test", "mail.example.test A"]}]
FALLBACK_LINES = ("runs the Python loop", "runs on the pure-Python loop")


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    if not (stream_fast.available() and doh_fast.available()):  # CI=true: must be built
        pytest.fail("soak.load._faststream or _fastdoh is not built (libssl-dev, libnghttp2-dev)")


def load(
    server: ServerProc, host: str, protocol: str, tls_cert: tuple[Path, Path], tmp: Path
) -> dict[str, Any]:
    # the certificate names SERVER_NAME and 127.0.0.1, not localhost: verified by name
    tls = {"ca_file": str(tls_cert[0]), "server_name": SERVER_NAME}
    cfg = LoadConfig(
        protocol=protocol, flows=2, workers=2, seed=1, mix=LOCAL,
        **({"tls": tls} if protocol != "tcp" else {}),
    )  # fmt: skip
    target = (host, server.port_for(protocol))
    return run_load(cfg, target, 1.5, 300.0, base_dir=tmp).to_json_dict()


@pytest.mark.parametrize("protocol", ["tcp", "dot", "doh"])
def test_localhost_runs_the_compiled_loop_as_the_address_does(
    tls_unbound: ServerProc,
    tls_cert: tuple[Path, Path],
    protocol: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("SOAK_LOAD_PURE", raising=False)
    by_name = load(tls_unbound, "localhost", protocol, tls_cert, tmp_path / "name")
    err = capfd.readouterr().err
    assert not any(line in err for line in FALLBACK_LINES), err
    by_address = load(tls_unbound, "127.0.0.1", protocol, tls_cert, tmp_path / "address")
    for d in (by_name, by_address):
        assert_every_query_answered(d, 450)
    # two workers of two connections each, every one opened once
    assert by_name["connections"]["opened"] == 4 == by_address["connections"]["opened"]


# The moving name: one worker's engine driven here as udp_fast.drive drives it (run, then
# Target.follow), its connects counted by take().
QUESTION = b"\x03www\x07example\x04test\x00\x00\x01\x00\x01"  # answered by unbound
RATE_QPS = 50.0
QUOTA = 5  # TCP: a new connection every 5 queries (100 ms), so connects keep coming
ROUND_NS = 50_000_000


def moving_spec(protocol: str, port: int) -> WorkerSpec:
    return WorkerSpec(
        index=0, host="dns.moving.test", port=port, protocol=protocol, flows=1, timeout_s=0.5,
        classes=[ClassQueries("a", 1.0, [QUESTION])], schedule=[0], start_offset=0,
        max_outstanding=10, duration_s=10.0, max_duration_s=10.0,
        policies=[Policy(queries_per_connection=QUOTA) if protocol == "tcp" else Policy()],
    )  # fmt: skip


class Driven:
    """An engine on the compiled loop, paced at RATE_QPS from its start."""

    def __init__(self, spec: WorkerSpec, target: Target) -> None:
        self.target = target
        self.start_ns = monotonic_ns()
        fast = stream_fast if spec.protocol == "tcp" else doh_fast
        self.engine = fast.make_engine(spec, self.start_ns, target.address)
        self.engine.begin(self.start_ns)

    def run_s(self, seconds: float) -> tuple[int, int, int]:
        """Runs for `seconds`: the connections opened, the connection errors and the
        answers read meanwhile."""
        end_ns = monotonic_ns() + int(seconds * 1e9)
        while (now := monotonic_ns()) < end_ns:
            until = min(now + ROUND_NS, end_ns)
            self.engine.run(until, self.start_ns + 10**11, RATE_QPS, self.start_ns, 0, 0.0, True)
            self.target.follow(self.engine, monotonic_ns())
        counts = self.engine.take(0)
        opened, errors = counts[9][0], counts[9][1]
        return opened, errors, counts[7]


@pytest.mark.parametrize("protocol", ["tcp", "doh"])
def test_a_name_that_moves_is_followed_by_later_connects(
    tls_unbound: ServerProc, protocol: str
) -> None:
    answers: dict[str, str | None] = {"address": "127.0.0.2"}  # nothing listens there
    port = tls_unbound.port_for(protocol)
    target = Target("dns.moving.test", port, resolver=lambda host, port: answers["address"])
    driven = Driven(moving_spec(protocol, port), target)
    try:
        opened, errors, answered = driven.run_s(0.6)
        assert (opened, answered) == (0, 0) and errors >= 1  # refused at the old address
        answers["address"] = "127.0.0.1"  # the server's: asked again within a second
        opened, errors, answered = driven.run_s(1.5)
        assert opened >= 1 and answered >= 1, (opened, errors, answered)
        if protocol == "doh":
            return  # its connections last: no connect more to follow the name
        answers["address"] = None  # the name no longer resolves
        driven.run_s(1.4)  # asked again by now; connections under way end their quota
        opened, errors, answered = driven.run_s(0.5)
        assert opened == 0 and errors >= 1, (opened, errors, answered)
    finally:
        driven.engine.finish()
