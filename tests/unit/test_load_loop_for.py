"""Which loop a load worker runs (child.loop_for): the compiled ones where they are
built and fit the spec, the Python ones otherwise, said on stderr when the compiled
one is missing."""

from __future__ import annotations

import pytest

from soak.load import stream_fast, udp_fast
from soak.load.child import loop_for
from soak.load.conn import Policy, alpn_wire
from soak.load.queries import ClassQueries
from soak.load.tcp import run_tcp
from soak.load.udp import run_udp
from soak.load.worker import WorkerSpec

QUESTION = b"\x03www\x04test\x00\x00\x01\x00\x01"


def spec(
    protocol: str, policy: Policy | None = None, index: int = 0, host: str = "127.0.0.1"
) -> WorkerSpec:
    return WorkerSpec(
        index=index, host=host, port=53, protocol=protocol, flows=1, timeout_s=2.0,
        classes=[ClassQueries("a", 1.0, [QUESTION])], schedule=[0], start_offset=0,
        max_outstanding=10, duration_s=1.0, max_duration_s=1.0,
        policies=[policy] if policy is not None else None,
    )  # fmt: skip


@pytest.fixture(autouse=True)
def compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOAK_LOAD_PURE", raising=False)
    assert stream_fast.available() and udp_fast.available()  # built by `make setup`


@pytest.mark.parametrize("protocol", ["tcp", "dot"])
def test_tcp_and_dot_run_the_compiled_stream_loop(protocol: str) -> None:
    assert loop_for(spec(protocol)) is stream_fast.run_stream_fast
    assert loop_for(spec(protocol, Policy())) is stream_fast.run_stream_fast


@pytest.mark.parametrize(
    "policy",
    [
        Policy(queries_per_connection=10),
        Policy(queries_per_connection=10, idle_ns=10**8),
        Policy(reconnect_every_ns=10**9),
        Policy(queries_per_connection=10, hangup_fraction=0.5),
        Policy(reconnect_every_ns=10**9, hangup_fraction=1.0),
    ],
)
def test_connections_that_churn_run_the_compiled_loop(policy: Policy) -> None:
    assert loop_for(spec("dot", policy)) is stream_fast.run_stream_fast


def test_the_compiled_loop_gets_each_class_its_slots_and_policy() -> None:
    s = spec("tcp", Policy(queries_per_connection=7, idle_ns=5, reconnect_every_ns=9))
    assert stream_fast.churn_args(s) == ([[0]], [(7, 5, 9, 0.0, 0)])
    hanging = spec("tcp", Policy(queries_per_connection=7, hangup_fraction=0.25))
    assert stream_fast.churn_args(hanging) == ([[0]], [(7, 0, -1, 0.25, 0)])
    assert stream_fast.churn_args(spec("tcp", Policy())) is None  # connections that last


@pytest.mark.parametrize("protocol", ["tcp", "dot"])
def test_a_name_to_resolve_runs_the_compiled_loop_quietly(
    protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert loop_for(spec(protocol, host="::1")) is stream_fast.run_stream_fast
    assert loop_for(spec(protocol, host="localhost")) is stream_fast.run_stream_fast
    assert capsys.readouterr().err == ""


def test_soak_load_pure_forces_the_python_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOAK_LOAD_PURE", "1")
    assert loop_for(spec("tcp")) is run_tcp
    assert loop_for(spec("dot")) is run_tcp
    assert loop_for(spec("udp")) is run_udp


def test_a_missing_extension_is_said_once_and_the_python_loop_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(stream_fast, "_fast", None)
    assert loop_for(spec("dot")) is run_tcp
    [line] = capsys.readouterr().err.splitlines()
    assert "soak.load._faststream is not built; dot runs the Python loop" in line
    assert "libssl-dev" in line
    assert loop_for(spec("dot", index=1)) is run_tcp  # the other workers stay quiet
    assert capsys.readouterr().err == ""


def test_alpn_names_go_to_openssl_length_prefixed() -> None:
    assert alpn_wire(("dot", "h2")) == b"\x03dot\x02h2"
    assert alpn_wire(("h2", "http/1.1")) == b"\x02h2\x08http/1.1"
    assert alpn_wire(()) == b""
