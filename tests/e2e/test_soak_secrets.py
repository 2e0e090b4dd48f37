"""A scenario's secrets given by reference stay out of the data directory, which is its
user's only: a real foreground run of refdns (its API token) with `{env.NAME}` and
`{file:PATH}` references, one of them rendered into a target's file (removed when the
target stops)."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

import pytest

from soak.sinks.sqlite import SqliteStore
from tests.e2e.soakrun import ROOT, last_json, run_soak
from tests.support.ledger import assert_figures_agree
from tests.support.refdns import refdns_binary

pytestmark = pytest.mark.e2e

SCENARIO = ROOT / "scenarios" / "refdns-demo.yaml"
TOKEN_ENV = "SOAK_TEST_REFDNS_TOKEN"


def by_reference(token_file: Path, server_data: Path) -> list[str]:
    """The demo's token, given by reference everywhere it is used: the server's environment
    and the samplers' headers (one of them from a file)."""
    env_ref = f"{{env.{TOKEN_ENV}}}"
    sets = {
        "target.env.REFDNS_TOKEN": f'"{env_ref}"',  # quoted: YAML reads {...} as a mapping
        # A rendered file that holds it (a server's config): in clear while the target
        # runs, gone when it stops.
        "target.files": f'[{{dest: token.conf, content: "token={env_ref}"}},'
        ' {dest: plain.conf, content: "port={port.dns}"}]',
        "samplers.pprof.headers.Authorization": f"Bearer {env_ref}",
        "samplers.http.0.headers.Authorization": f"Bearer {{file:{token_file}}}",
        "samplers.http.1.headers.Authorization": f"Bearer {env_ref}",
        "samplers.http.2.headers.Authorization": f"Bearer {env_ref}",
        # The server keeps its token in its own state.db: that file is the server's, so its
        # data directory is put outside soak's (docs/service.md).
        "target.data_dir": str(server_data),
        "phases.0.duration_s": "5s",
        "phases.1.duration_s": "10s",
        "criteria.p99_ms_max": "{all: 1000}",
        "criteria.api_latency_ms_max": "{}",
        "samplers.pprof.interval_s": "5s",
    }
    return [arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")]


def test_a_token_by_reference_is_in_no_file_and_every_file_is_private(tmp_path: Path) -> None:
    refdns_binary()
    token = f"tok-{secrets.token_hex(12)}"
    token_file = tmp_path / "refdns.token"
    token_file.write_text(token + "\n")
    data = tmp_path / "data"
    proc = run_soak(
        "start", str(SCENARIO), "--foreground", "--json", "--data-dir", str(data),
        *by_reference(token_file, tmp_path / "server-data"),
        env={TOKEN_ENV: token},
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    status = last_json(proc.stdout)
    # The token worked: the API calls that need it were answered 200.
    store = SqliteStore(data / "points.db")
    try:
        calls = store.series(status["id"], "api", "status", {"endpoint": "GET /stats/summary"})
    finally:
        store.close()
    assert calls and {v for _, v in calls[0][1]} == {200}, calls
    # Nowhere in clear: not in a file of the data directory, not in what soak printed.
    assert token not in proc.stdout and token not in proc.stderr
    files = [p for p in data.rglob("*") if p.is_file()]
    assert len(files) >= 5  # state, points, result, reports, logs
    holding = [str(p) for p in files if token.encode() in p.read_bytes()]
    assert holding == []
    # The files were rendered; the one that held the token is gone, the other is kept.
    rendered = {p.name for p in files if p.name.endswith(".conf")}
    assert rendered == {"plain.conf"}, rendered
    # The state keeps the reference as written.
    assert f"{{env.{TOKEN_ENV}}}".encode() in (data / "state.db").read_bytes()
    # Every directory 0700 and every file without group or other bits.
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    loose = [
        f"{p}: {stat.S_IMODE(p.stat().st_mode):04o}"
        for p in [data, *data.rglob("*")]
        if stat.S_IMODE(p.stat().st_mode) & 0o077
    ]
    assert loose == []
    assert os.stat(data / "state.db").st_uid == os.getuid()
    assert_figures_agree(data, status["id"], kept_up=False)
