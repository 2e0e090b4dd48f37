"""The compiled DoH loop (soak.load._fastdoh) against the Python one (doh.py), on real
servers on loopback with a certificate made here: unbound's https-port and
knot-resolver's doh2, POST and GET, the engine's socket counters against the ledger,
a server stopped and started again mid-run, connection policies that churn (the same
counts per class, the connections each loop opened equal to the SYNs tcpdump saw),
and the fallbacks: SOAK_LOAD_PURE=1, and a policy that hangs up.
"""

from __future__ import annotations

import functools
import math
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from soak.load import doh_fast
from soak.load.generator import LoadRunner
from soak.load.load_config import LoadConfig
from soak.load.oneshot import run_load
from tests.integration.test_load_stream_churn import (
    HANGING_MIX,
    MIX,
    QUOTA_A,
    QUOTA_B,
    hung_up_alike,
    syns,
)
from tests.support.doh_goaway import goaway_server
from tests.support.ledger import assert_every_query_answered
from tests.support.servers import ServerProc, unbound
from tests.support.tls import SERVER_NAME
from tests.support.traffic import tcpdump_lo
from tests.support.unbound_counts import unbound_queries
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

LOCAL = {"name": "local", "queries": ["www.example.test", "mail.example.test A"]}
PURE_LINE = "soak load: DoH runs on the pure-Python loop"


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    if not doh_fast.available():  # CI=true: the build must have made it
        pytest.fail("soak.load._fastdoh is not built (libssl-dev, libnghttp2-dev)")


def load(port: int, tmp: Path, method: str, **cfg: Any) -> dict[str, Any]:
    config = LoadConfig(protocol="doh", flows=2, mix=[LOCAL], doh={"method": method}, **cfg)
    return run_load(config, ("127.0.0.1", port), 1.5, 300.0, base_dir=tmp).to_json_dict()


def both_loops(
    port: int,
    tmp: Path,
    method: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same spec on the compiled loop, then on the Python one (SOAK_LOAD_PURE=1); the
    workers' stderr says which ran."""
    monkeypatch.delenv("SOAK_LOAD_PURE", raising=False)
    compiled = load(port, tmp / "c", method)
    assert PURE_LINE not in capfd.readouterr().err
    monkeypatch.setenv("SOAK_LOAD_PURE", "1")
    pure = load(port, tmp / "p", method)
    assert f"{PURE_LINE} (SOAK_LOAD_PURE=1" in capfd.readouterr().err
    return compiled, pure


def loop_is(pure: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python loop (SOAK_LOAD_PURE=1) when `pure`, else the compiled one."""
    if pure:
        monkeypatch.setenv("SOAK_LOAD_PURE", "1")
    else:
        monkeypatch.delenv("SOAK_LOAD_PURE", raising=False)


def same_counts(compiled: dict[str, Any], pure: dict[str, Any]) -> None:
    for d in (compiled, pure):
        assert_every_query_answered(d, 450)
        assert d["rcodes"] == {"NOERROR": 450}
        assert d["connections"]["opened"] == 2
    keys = ("sent", "completed", "lost", "rcodes", "engine_counters")
    assert {k: compiled[k] for k in keys} == {k: pure[k] for k in keys}


@pytest.mark.parametrize("method", ["POST", "GET"])
def test_unbound_compiled_and_python_loops_count_the_same(
    tls_unbound: ServerProc,
    method: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    same_counts(*both_loops(tls_unbound.extra_ports["doh"], tmp_path, method, monkeypatch, capfd))


def test_knot_resolver_compiled_and_python_loops_count_the_same(
    tls_kresd: ServerProc,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    same_counts(*both_loops(tls_kresd.extra_ports["doh"], tmp_path, "POST", monkeypatch, capfd))


def test_knot_resolver_answers_every_get_on_the_compiled_loop(
    tls_kresd: ServerProc, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The Python loop loses some GETs to knot-resolver 5.6 (a GOAWAY, FRAME_SIZE_ERROR,
    docs/load.md); the compiled one does not."""
    d = load(tls_kresd.extra_ports["doh"], tmp_path, "GET")
    assert PURE_LINE not in capfd.readouterr().err
    assert d["sent"] == 450 and d["completed"] == 450 and d["rcodes"] == {"NOERROR": 450}
    counters = {"socket_sent": 450, "socket_received": 450, "send_failed": 0}
    assert d["engine_counters"] == counters and d["connections"]["errors"] == 0


def test_ca_file_and_server_name_verify_the_server(
    tls_unbound: ServerProc,
    tls_cert: tuple[Path, Path],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    port = tls_unbound.extra_ports["doh"]
    d = load(
        port,
        tmp_path / "right",
        "POST",
        tls={"ca_file": str(tls_cert[0]), "server_name": SERVER_NAME},
    )
    assert d["completed"] == 450 and d["connections"]["errors"] == 0
    wrong = {"ca_file": str(tls_cert[0]), "server_name": "other.example"}
    d = load(port, tmp_path / "wrong", "POST", tls=wrong)
    assert d["completed"] == 0 and d["connections"]["errors"] > 0
    assert d["connections"]["opened"] == 0
    assert PURE_LINE not in capfd.readouterr().err  # both on the compiled loop


def test_a_long_path_runs_on_the_python_loop_and_says_so(
    tls_unbound: ServerProc, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """What the compiled loop does not serve (doh_fast.unfit; a server given by name
    too, tests/unit) runs on the Python one, said on stderr."""
    config = LoadConfig(protocol="doh", flows=1, mix=[LOCAL], doh={"path": "/" + "p" * 600})
    d = run_load(
        config, ("127.0.0.1", tls_unbound.extra_ports["doh"]), 1.0, 50.0, base_dir=tmp_path
    )
    assert d.to_json_dict()["sent"] == 50
    assert f"{PURE_LINE} (doh.path is longer than 512 bytes)" in capfd.readouterr().err


Run = tuple[dict[str, Any], int, int]  # the result, the queries the server counted, SYNs


def churn_both(
    port: int,
    tmp: Path,
    mp: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    server_count: Callable[[], int] | None = None,
    rate_qps: float = 500.0,
    duration_s: float = 2.0,
    **cfg: Any,
) -> tuple[Run, Run]:
    """The same churning spec on the compiled loop, then on the Python one, each under
    tcpdump; the workers' stderr says which ran."""
    runs = []
    for pure in (False, True):
        if pure:
            mp.setenv("SOAK_LOAD_PURE", "1")  # workers inherit the environment
        else:
            mp.delenv("SOAK_LOAD_PURE", raising=False)
        run = tmp / ("python" if pure else "compiled")
        run.mkdir()
        before = server_count() if server_count else 0
        spec = {"flows": 2, "workers": 2, "mix": MIX, **cfg}
        config = LoadConfig(protocol="doh", seed=1, **spec)
        with tcpdump_lo(port, run / "c.pcap"):
            target = ("127.0.0.1", port)
            d = run_load(config, target, duration_s, rate_qps, base_dir=run).to_json_dict()
        assert (PURE_LINE in capfd.readouterr().err) == pure
        queries = server_count() - before if server_count else d["completed"]
        runs.append((d, queries, syns(run / "c.pcap", port)))
    return runs[0], runs[1]


def churned_alike(compiled: Run, python: Run, quotas: dict[str, int]) -> None:
    """Both loops: every query answered, the same counts per class, and the connections
    each opened (and resumed) as many as tcpdump saw and the quotas call for."""
    (c, c_queries, c_syns), (p, p_queries, p_syns) = compiled, python
    for d, queries in ((c, c_queries), (p, p_queries)):
        assert d["sent"] == 1000 == d["completed"] == queries and d["lost"] == 0, d
        assert d["engine_counters"] == {
            "socket_sent": 1000,
            "socket_received": 1000,
            "send_failed": 0,
        }
        assert d["connections"]["errors"] == 0, d["connections"]
    for name in quotas:
        cc, pc = c["classes"][name], p["classes"][name]
        assert (cc["sent"], cc["completed"], cc["lost"]) == (pc["sent"], pc["completed"], 0)
    assert c["rcodes"] == p["rcodes"]
    # one slot per class and worker: a class's n queries there take ceil(n / quota)
    # connections; over two workers at least this many, at most one more per worker
    least = sum(math.ceil(c["classes"][n]["sent"] / q) for n, q in quotas.items())
    opened = c["connections"]["opened"]
    assert least <= opened <= least + 2 * len(quotas), (least, opened)
    assert opened == c_syns == p["connections"]["opened"] == p_syns
    slots = 2 * len(quotas)
    for d in (c, p):  # every one but each slot's first resumes its slot's session
        assert opened - slots - 2 <= d["connections"]["tls_resumed"] <= opened - slots, d


@pytest.fixture
def churn_on_unbound(
    counted_unbound: tuple[ServerProc, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> Callable[..., tuple[Run, Run]]:
    """churn_both against unbound's DoH, the server's own count of its queries beside."""
    proc, sock = counted_unbound
    port = proc.extra_ports["doh"]
    return functools.partial(
        churn_both, port, tmp_path, monkeypatch, capfd, lambda: unbound_queries(sock)[1]
    )


def test_a_quota_per_connection_churns_alike_on_both_loops(
    churn_on_unbound: Callable[..., tuple[Run, Run]],
) -> None:
    """Two classes with their own quotas (class a also idles 50 ms before each close);
    the server's own count of the queries equal to what each loop sent."""
    compiled, python = churn_on_unbound()
    churned_alike(compiled, python, {"a": QUOTA_A, "b": QUOTA_B})


def test_knot_resolver_churns_alike_on_both_loops(
    tls_kresd: ServerProc,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    mix = [{**LOCAL, "connection": {"queries_per_connection": QUOTA_A}}]
    port = tls_kresd.extra_ports["doh"]
    compiled, python = churn_both(port, tmp_path, monkeypatch, capfd, mix=mix, flows=1)
    churned_alike(compiled, python, {"local": QUOTA_A})


def test_an_age_churns_connections_seen_at_the_server(
    counted_unbound: tuple[ServerProc, Path],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """reconnect_every_s on the compiled loop: each connection retires at 0.45 s of
    age (0.5 would retire the fifth as the 2-s run ends), its answers kept."""
    port = counted_unbound[0].extra_ports["doh"]
    mix = [{**LOCAL, "connection": {"reconnect_every_s": 0.45}}]
    config = LoadConfig(protocol="doh", flows=1, mix=mix)
    with tcpdump_lo(port, tmp_path / "c.pcap"):
        d = run_load(config, ("127.0.0.1", port), 2.0, 500.0, base_dir=tmp_path).to_json_dict()
    assert PURE_LINE not in capfd.readouterr().err
    assert d["sent"] == 1000 == d["completed"], d
    conns = d["connections"]
    # one at the start and one at every 0.45 s of age over 2 s (fewer if the loop was slow)
    assert 3 <= conns["opened"] <= 5 and conns["errors"] == 0, conns
    assert conns["opened"] == syns(tmp_path / "c.pcap", port)
    assert conns["tls_resumed"] >= conns["opened"] - 2  # each offered its slot's session


def test_hang_ups_abandon_alike_on_both_loops(
    churn_on_unbound: Callable[..., tuple[Run, Run]],
) -> None:
    """One worker, one slot per class: class a's every second connection resets after 4
    requests, each of class b's after 7, right after its last request left: each such
    connection abandons that request, and an earlier one whose answer is not in yet (20
    q/s, as the DoT case of test_load_stream_churn.py, which says why)."""
    compiled, python = churn_on_unbound(20.0, 4.5, mix=HANGING_MIX, workers=1)
    hung_up_alike(compiled, python, 90)


def test_a_restarted_server_is_reconnected_and_its_silence_counted_lost(
    tls_cert: tuple[Path, Path], tmp_path: Path
) -> None:
    cfg = LoadConfig(protocol="doh", flows=2, timeout_s=0.5, mix=[LOCAL])
    with unbound(tmp_path, tls=tls_cert) as s:
        runner = LoadRunner(cfg, ("127.0.0.1", s.extra_ports["doh"]), base_dir=tmp_path)
        runner.start(300.0, max_duration_s=30.0)
        wait_for(lambda: runner.totals().completed >= 150, 10, "answers before the stop")
        s.stop()
        wait_for(lambda: runner.totals().lost > 0, 10, "queries lost while it is down")
        before = runner.totals()
        s.proc = subprocess.Popen(s.proc.args, cwd=tmp_path, start_new_session=True)
        wait_for(
            lambda: runner.totals().completed >= before.completed + 300,
            15,
            "answers on new connections",
        )
        result = runner.stop()
        s.stop()
    d = result.to_json_dict()
    assert d["sent"] == d["completed"] + d["lost"] and d["lost"] >= before.lost > 0
    conns = d["connections"]
    assert conns["opened"] >= 3 and conns["errors"] > 0, conns  # refused while down
    # due while no connection was up: counted sent, never written, failed at the socket
    sockets = d["engine_counters"]
    assert sockets["send_failed"] > 0, sockets
    assert sockets["socket_sent"] + sockets["send_failed"] == d["sent"], sockets
    assert sockets["socket_received"] == d["completed"], sockets


@pytest.mark.parametrize("pure", [False, True])
def test_connections_told_to_go_away_are_replaced_and_their_answers_kept(
    tls_cert: tuple[Path, Path], tmp_path: Path, pure: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GOAWAY (NO_ERROR) after every 40 answers: each connection retires, a new one takes
    its slot at once, and what the old one had answered still counts; on the compiled
    loop and on the Python one (SOAK_LOAD_PURE=1: doh.DohFlow counts alike)."""
    loop_is(pure, monkeypatch)
    # A timeout far above any answer's time even on a busy machine: a loss here is the
    # GOAWAY's refused stream, never a slow answer (at 0.5 s, a slow one failed the test).
    with goaway_server(tls_cert, per_connection=40) as port:
        d = load(port, tmp_path, "POST", timeout_s=5.0)
    conns = d["connections"]
    assert d["sent"] == 450 == d["completed"] + d["lost"]
    # Each connection answers 40 at most, so what was answered took this many; how many
    # requests cross a GOAWAY depends on how busy the machine is (78 of 450 seen once).
    assert conns["opened"] >= -(-d["completed"] // 40) and d["completed"] >= 200, (d, conns)
    # a request that crossed the GOAWAY is refused by it (a connection error, lost), and
    # counted refused (nghttp2 closes it REFUSED_STREAM, DohFlow.refused_by_goaway the
    # same), not sent again: its connection is going away; each GOAWAY counted
    assert d["lost"] == conns["errors"], (d["lost"], conns)
    assert conns["streams_refused"] == conns["streams_reset"] == d["lost"], (d["lost"], conns)
    assert conns["streams_retried"] == 0 and conns["goaways"] >= 1, conns
    sockets = d["engine_counters"]
    assert sockets["socket_received"] == d["completed"], sockets
    assert sockets["socket_sent"] + sockets["send_failed"] == d["sent"], sockets


def test_the_build_names_the_missing_package_in_one_line() -> None:
    """Without nghttp2's headers (here: no system include path at all) the compiler says
    one thing, the package to install, and nothing after it."""
    import sysconfig

    src = Path(doh_fast.__file__).with_name("_fastdoh.c")
    argv = ["gcc", "-fsyntax-only", "-nostdinc", "-I", sysconfig.get_paths()["include"], str(src)]
    out = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
    assert out.returncode != 0
    errors = [line for line in out.stderr.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "apt-get install libnghttp2-dev" in errors[0], out.stderr


@pytest.mark.parametrize("pure", [False, True])
def test_streams_the_server_resets_are_counted_by_either_loop(
    tmp_path: Path,
    tls_cert: tuple[Path, Path],
    pure: bool,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """unbound with a 1-byte `http-response-buffer-size` resets every request's stream
    (INTERNAL_ERROR): the load counts each reset, none refused, no GOAWAY, and every
    query is lost (docs/load.md); the compiled loop and the Python one alike."""
    loop_is(pure, monkeypatch)
    with unbound(tmp_path, tls=tls_cert, tls_options="http-response-buffer-size: 1") as s:
        d = load(s.extra_ports["doh"], tmp_path / "run", "POST", timeout_s="0.3s")
    assert (PURE_LINE in capfd.readouterr().err) == pure
    conns = d["connections"]
    assert d["sent"] > 0 and d["completed"] == 0 and d["lost"] == d["sent"], d
    assert conns["streams_reset"] == d["sent"] and conns["streams_refused"] == 0, conns
    assert conns["streams_retried"] == conns["goaways"] == 0, conns
