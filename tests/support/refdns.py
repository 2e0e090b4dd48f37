"""The reference Go DNS server (testbed/refdns) for tests: built once, started on loopback.

`refdns_binary()` runs scripts/build-refdns.sh (a no-op when the binary is newer than
its sources); `refdns(...)` starts it with a temp data directory and stops it.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.servers import ServerProc, free_port, serving, spawn

ROOT = Path(__file__).resolve().parents[2]
BINARY = ROOT / "build" / "refdns" / "refdns"
TOKEN = "refdns-test-token"


def refdns_binary() -> Path:
    if shutil.which("go") is None:
        pytest.skip("golang-go is not installed (scripts/install-system-deps.sh)")
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-refdns.sh")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"build-refdns.sh failed: {done.stderr.strip()}")
    return BINARY


@contextlib.contextmanager
def refdns(
    data: Path, *args: str, upstream_port: int | None = None, token: str | None = TOKEN
) -> Iterator[ServerProc]:
    """refdns on free loopback ports; extra_ports['api'] is its HTTP API."""
    binary = refdns_binary()
    data.mkdir(parents=True, exist_ok=True)
    port, api_port = free_port(), free_port()
    argv = [
        str(binary),
        f"-dns=127.0.0.1:{port}",
        f"-api=127.0.0.1:{api_port}",
        f"-data={data}",
        *([f"-upstream=127.0.0.1:{upstream_port}"] if upstream_port else []),
        *args,
    ]
    env_argv = ["env", f"REFDNS_TOKEN={token}"] if token else ["env", "-u", "REFDNS_TOKEN"]
    with serving(
        spawn(f"refdns-{api_port}", [*env_argv, *argv], data.parent, port, api=api_port),
        "www.home.arpa.",
        api_port,
    ) as server:
        yield server


def api_get(server: ServerProc, path: str, token: str = TOKEN) -> httpx.Response:
    return httpx.get(
        f"http://127.0.0.1:{server.extra_ports['api']}{path}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10.0,
    )
