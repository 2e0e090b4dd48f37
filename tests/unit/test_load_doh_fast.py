"""Which DoH loop a worker runs (child.loop_for, doh_fast.unfit) and the ALPN wire form."""

from __future__ import annotations

import dataclasses

import pytest

from soak.load import child, doh_fast
from soak.load.conn import Policy
from soak.load.tcp import run_tcp
from soak.load.worker import ClassQueries, WorkerSpec

SPEC = WorkerSpec(
    index=0, host="127.0.0.1", port=443, protocol="doh", flows=1, timeout_s=2.0,
    classes=[ClassQueries("a", 1.0, [b"\x03www\x04test\x00\x00\x01\x00\x01"])], schedule=[0],
    start_offset=0, max_outstanding=10, duration_s=1.0, max_duration_s=1.0,
)  # fmt: skip


def test_connections_that_last_fit_the_compiled_loop() -> None:
    assert doh_fast.unfit(SPEC) is None
    assert doh_fast.unfit(dataclasses.replace(SPEC, host="::1")) is None
    assert doh_fast.unfit(dataclasses.replace(SPEC, host="localhost")) is None  # target.py
    assert doh_fast.unfit(dataclasses.replace(SPEC, policies=[Policy(idle_ns=5)])) is None


@pytest.mark.parametrize(
    "policy",
    [
        Policy(queries_per_connection=10, idle_ns=5),
        Policy(reconnect_every_ns=10**9),
        Policy(queries_per_connection=10, hangup_fraction=0.5),
    ],
)
def test_connections_that_churn_or_hang_up_fit_the_compiled_loop(policy: Policy) -> None:
    assert doh_fast.unfit(dataclasses.replace(SPEC, policies=[policy])) is None


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"doh_path": "/" + "p" * 512}, "longer than 512 bytes"),
    ],
)
def test_what_the_compiled_loop_does_not_serve_runs_on_the_python_loop_and_says_why(
    change: dict[str, object], why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = dataclasses.replace(SPEC, **change)  # type: ignore[arg-type]
    assert why in (doh_fast.unfit(spec) or "")
    assert child.loop_for(spec) is run_tcp
    err = capsys.readouterr().err
    assert err.startswith("soak load: DoH runs on the pure-Python loop (") and why in err


def test_the_compiled_loop_is_picked_unless_soak_load_pure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not doh_fast.available():
        pytest.fail("soak.load._fastdoh is not built (libssl-dev, libnghttp2-dev)")
    monkeypatch.delenv("SOAK_LOAD_PURE", raising=False)
    assert child.loop_for(SPEC) is doh_fast.run_doh_fast
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("SOAK_LOAD_PURE", "1")
    assert child.loop_for(SPEC) is run_tcp
    assert "pure-Python loop (SOAK_LOAD_PURE=1" in capsys.readouterr().err
    # the other workers of the same run stay quiet: the first one said it
    assert child.loop_for(dataclasses.replace(SPEC, index=1)) is run_tcp
    assert capsys.readouterr().err == ""


def test_the_doh_extension_is_optional_so_the_others_build_without_its_headers() -> None:
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    exts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["ext-modules"]
    [doh] = [e for e in exts if e["name"] == "soak.load._fastdoh"]
    assert doh["optional"] is True
    assert set(doh["libraries"]) == {"ssl", "crypto", "nghttp2"}
    # every part of it is a dependency of the build, so an edit rebuilds it
    parts = {p.name for p in (root / "src/soak/load").glob("_fastdoh*.h")}
    assert parts == {Path(d).name for d in doh["depends"] if "_fastdoh" in d}
    makefile = (root / "Makefile").read_text()
    assert all(f"src/soak/load/{p}" in makefile for p in parts)
