"""What a DoH server's HTTP/2 layer says is counted as its own figure by the compiled DoH
replay (soak.load.replay._fastreplay_doh) and by the Python one (doh.DohFlow, forced with
SOAK_REPLAY_ENGINE=python), not only as queries lost at their timeout: streams it ended
with an error code (RST_STREAM, or above a GOAWAY's last stream id), of them
REFUSED_STREAM, and GOAWAY frames (docs/replay.md). Against real unbound."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.load.replay import Replay, _engine
from soak.traffic.capture_file import TCP, Capture, Query
from soak.traffic.replay_config import ReplayConfig
from tests.support.servers import unbound
from tests.support.tls import make_cert

pytestmark = pytest.mark.integration

WWW = b"\x03www\x07example\x04test\x00"


def replay_doh(tmp: Path, tls_options: str, due_ns: list[int], loop: str = "compiled") -> dict:
    """One client's queries at due_ns over DoH, on `loop` ("compiled" or "python"), against
    unbound with tls_options; 0.5-s timeout."""
    capture = Capture("t", ["10.0.0.1"], [Query(t, 0, 0, 0x0100, 1, TCP, WWW) for t in due_ns])
    cfg = ReplayConfig(file=tmp / "unused", transport="doh", idle_timeout_s=30)
    with unbound(tmp, tls=make_cert(tmp), tls_options=tls_options) as server:
        replay = Replay(cfg, capture, "127.0.0.1", server.port_for("doh"), 0.5)
        assert (_engine.python_reason(replay) is None) == (loop == "compiled")
        return replay.run(None).as_dict()


@pytest.mark.parametrize("loop", ["compiled", "python"])
def test_streams_the_server_resets_are_counted_as_such(
    tmp_path: Path, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """unbound with a 1-byte `http-response-buffer-size` resets every request's stream
    (RST_STREAM, INTERNAL_ERROR: no room for its answer): each query is sent and lost,
    and each is counted reset, none refused (unbound processed them), no GOAWAY, by
    either loop."""
    monkeypatch.setenv(_engine.ENV, loop)
    d = replay_doh(
        tmp_path, "http-response-buffer-size: 1", [k * 20_000_000 for k in range(10)], loop
    )
    assert (d["sent"], d["completed"], d["lost"]) == (10, 0, 10), d
    conns = d["connections"]
    assert (conns["streams_reset"], conns["streams_refused"], conns["goaways"]) == (10, 0, 0), d
    assert conns["streams_retried"] == 0, d
    assert conns["opened"] == 1, conns  # the connection itself stays up


@pytest.mark.parametrize("loop", ["compiled", "python"])
def test_answered_streams_count_no_reset(
    tmp_path: Path, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same replay against unbound's defaults: every query answered, nothing reset."""
    monkeypatch.setenv(_engine.ENV, loop)
    d = replay_doh(tmp_path, "", [k * 20_000_000 for k in range(10)], loop)
    assert (d["sent"], d["completed"], d["lost"]) == (10, 10, 0), d
    conns = d["connections"]
    assert (conns["streams_reset"], conns["streams_refused"], conns["goaways"]) == (0, 0, 0), d


@pytest.mark.parametrize(
    ("loop", "answered", "refusals", "errors"),
    [("compiled", 5, (4, 4, 4), 0), ("python", 1, (4, 4, 0), 4)],
)
def test_streams_refused_before_the_servers_settings(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    loop: str,
    answered: int,
    refusals: tuple[int, int, int],
    errors: int,
) -> None:
    """unbound with `http-max-streams: 1`: a client's five queries due at once on a new
    connection leave before the server's SETTINGS arrive (nghttp2 assumes 100 streams
    until then), and unbound refuses four (REFUSED_STREAM: not processed). The compiled
    loop sends each again once on the same connection (nghttp2 holds it until a stream
    is free) and all are answered; before, the four were lost at their timeout. The
    Python loop (doh.DohFlow) counts them so but does not send them again
    (streams_retried 0): they are lost, each a connection error. Either way each query
    is counted once at the socket, though four left twice on the compiled loop."""
    monkeypatch.setenv(_engine.ENV, loop)
    d = replay_doh(tmp_path, "http-max-streams: 1", [0] * 5, loop)
    assert (d["sent"], d["completed"], d["lost"]) == (5, answered, 5 - answered), d
    conns = d["connections"]
    got = (conns["streams_reset"], conns["streams_refused"], conns["streams_retried"])
    assert got == refusals and conns["goaways"] == 0, d
    assert conns["opened"] == 1 and conns["errors"] == errors, conns
    assert d["engine_counters"]["socket_sent"] == 5, d
