"""`soak serve --listen` beyond loopback (refused without TLS or --insecure, served with
either) and `soak token` on a real service process."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.servers import free_port
from tests.support.tls import make_cert
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def soak(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SOAK_TOKEN"}
    return subprocess.run(
        [sys.executable, "-m", "soak.cli", *args],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=env, check=False,
    )  # fmt: skip


@contextmanager
def serving(tmp: Path, *args: str) -> Iterator[tuple[int, Path]]:
    """`soak serve --listen 0.0.0.0:PORT ARGS`, up (its /healthz answers on 127.0.0.1);
    (its port, its stderr file); stopped (SIGTERM) at the end."""
    port = free_port()
    log = tmp / f"serve-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "soak.cli", "serve", "--listen", f"0.0.0.0:{port}",
             "--data-dir", str(tmp / "data"), *args],
            stdout=out, stderr=out, cwd=ROOT,
        )  # fmt: skip
        try:
            wait_for(lambda: "serving on" in log.read_text(), 30.0, "the service's start line")
            yield port, log
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def answers(url: str, verify: ssl.SSLContext | bool = True) -> dict[str, object] | None:
    """/healthz's answer once the service listens, else None."""
    try:
        body: dict[str, object] = httpx.get(f"{url}/healthz", verify=verify, timeout=5).json()
    except httpx.TransportError:
        return None
    return body


def test_plain_http_beyond_loopback_is_refused(tmp_path: Path) -> None:
    r = soak("serve", "--listen", "0.0.0.0:8089", "--data-dir", str(tmp_path / "data"))
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        "soak: --listen 0.0.0.0: beyond loopback the tokens would cross the network in plain"
        " HTTP; give --tls-cert and --tls-key, or --insecure to accept that"
    ]
    assert not (tmp_path / "data").exists()  # refused before anything was made
    r = soak("serve", "--listen", "0.0.0.0:8089", "--tls-cert", "x.pem")
    assert r.returncode == 2
    assert r.stderr.strip() == "soak: --tls-cert and --tls-key go together"


def test_insecure_serves_with_a_warning(tmp_path: Path) -> None:
    with serving(tmp_path, "--insecure") as (port, log):
        health = wait_for(lambda: answers(f"http://127.0.0.1:{port}"), 30.0, "/healthz")
        assert health["ok"] is True
        lines = log.read_text().splitlines()
    assert "soak: warning: --insecure: plain HTTP on 0.0.0.0, beyond loopback" in lines[1]
    assert lines[0].startswith("soak: for trusted users only: a scenario runs its argv")
    assert f"soak: serving on http://0.0.0.0:{port}" in lines[2]


def test_tls_serves_https_without_a_warning(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path)
    with serving(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key)) as (port, log):
        url = f"https://127.0.0.1:{port}"
        trust = ssl.create_default_context(cafile=cert)
        health = wait_for(lambda: answers(url, trust), 30.0, "/healthz over TLS")
        assert health["ok"] is True
        text = log.read_text()
    assert "warning" not in text
    assert f"soak: serving on https://0.0.0.0:{port}" in text


def test_token_create_list_revoke(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    made = soak("token", "create", "--team", "dns-core", "--data-dir", data)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    token_id = made.stderr.split("id ")[1].split(";")[0]
    listed = soak("token", "list", "--data-dir", data)
    assert listed.stdout.split()[:4] == [token_id, "dns-core", "team", "created"]
    assert token not in listed.stdout
    assert listed.stdout.split()[-1] == "active"
    assert soak("token", "revoke", token_id, "--data-dir", data).returncode == 0
    assert "revoked" in soak("token", "list", "--data-dir", data).stdout
    r = soak("token", "revoke", "nope", "--data-dir", data)
    assert (r.returncode, r.stderr.strip()) == (2, "soak: no token 'nope' (see `soak token list`)")
    r = soak("token", "create", "--team", "admin", "--data-dir", data)
    assert (r.returncode, r.stderr.strip()) == (
        2,
        "soak: --team: 'admin' is the service token's own team",
    )
