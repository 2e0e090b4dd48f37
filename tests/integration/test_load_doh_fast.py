"""The compiled DoH loop (soak.load._fastdoh) against the Python one (doh.py), on real
servers on loopback with a certificate made here: unbound's https-port and
knot-resolver's doh2, POST and GET, the engine's socket counters against the ledger,
a server stopped and started again mid-run, and the fallback SOAK_LOAD_PURE=1 forces.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from soak.load import doh_fast
from soak.load.generator import LoadRunner
from soak.load.load_config import LoadConfig
from soak.load.oneshot import run_load
from tests.support.doh_goaway import goaway_server
from tests.support.ledger import assert_every_query_answered
from tests.support.servers import ServerProc, unbound
from tests.support.tls import SERVER_NAME
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


def test_a_churning_policy_runs_on_the_python_loop_and_says_so(
    tls_unbound: ServerProc, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    mix = [{**LOCAL, "connection": {"queries_per_connection": 50}}]
    config = LoadConfig(protocol="doh", flows=2, mix=mix)
    d = run_load(
        config, ("127.0.0.1", tls_unbound.extra_ports["doh"]), 1.0, 200.0, base_dir=tmp_path
    )
    assert d.to_json_dict()["completed"] == 200
    assert f"{PURE_LINE} (a connection policy churns or hangs up)" in capfd.readouterr().err


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


def test_connections_told_to_go_away_are_replaced_and_their_answers_kept(
    tls_cert: tuple[Path, Path], tmp_path: Path
) -> None:
    """GOAWAY (NO_ERROR) after every 40 answers: each connection retires, a new one takes
    its slot at once, and what the old one had answered still counts."""
    # A timeout far above any answer's time even on a busy machine: a loss here is the
    # GOAWAY's refused stream, never a slow answer (at 0.5 s, a slow one failed the test).
    with goaway_server(tls_cert, per_connection=40) as port:
        d = load(port, tmp_path, "POST", timeout_s=5.0)
    conns = d["connections"]
    assert d["sent"] == 450 == d["completed"] + d["lost"]
    # Each connection answers 40 at most, so what was answered took this many; how many
    # requests cross a GOAWAY depends on how busy the machine is (78 of 450 seen once).
    assert conns["opened"] >= -(-d["completed"] // 40) and d["completed"] >= 200, (d, conns)
    # a request that crossed the GOAWAY is refused by it (a connection error, lost)
    assert d["lost"] == conns["errors"], (d["lost"], conns)
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
