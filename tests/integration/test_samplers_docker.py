"""The proc sampler on a real container: its host PID's /proc, read from the host."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from soak.clock import NS_PER_S
from soak.samplers import TickRunner, build_samplers
from soak.samplers.selection import DigProbeConfig, PromSamplerConfig, SamplersConfig
from soak.targets.base import Running
from tests.support.servers import free_port
from tests.support.skips import docker_engine

pytestmark = [pytest.mark.integration, pytest.mark.docker]

IMAGE = "soak-test/pdns-auth:latest"
S = NS_PER_S


def docker_client() -> Any:
    return docker_engine([IMAGE])


def wait_http_ok(url: str, c: Any, timeout_s: float = 30.0) -> None:
    """Until pdns itself answers: docker-proxy accepts connections before the server listens,
    and the entrypoint shell has the same PID until it execs pdns_server."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        time.sleep(0.2)
    c.reload()
    raise AssertionError(f"container {c.status}, no answer at {url}: {c.logs()[-2000:]!r}")


@pytest.fixture(scope="module")
def container() -> Iterator[Running]:
    client = docker_client()
    dns_port, web_port = free_port(), free_port()
    c = client.containers.run(
        IMAGE,
        name=f"soak-test-samplers-{uuid.uuid4().hex[:8]}",
        detach=True,
        ports={
            "5300/udp": ("127.0.0.1", dns_port),
            "5300/tcp": ("127.0.0.1", dns_port),
            "8081/tcp": ("127.0.0.1", web_port),
        },
    )
    try:
        wait_http_ok(f"http://127.0.0.1:{web_port}/metrics", c)
        c.reload()
        pid = int(c.attrs["State"]["Pid"])
        ports = {"dns": dns_port, "web": web_port}
        yield Running("pdns-docker", "127.0.0.1", ports, pid, None, container_id=c.id)
    finally:
        c.remove(force=True)
        client.close()


def test_container_process_sampled_through_its_host_pid(container: Running) -> None:
    cfg = SamplersConfig(
        prom=PromSamplerConfig(port="web", map={"uptime_s": "pdns_auth_uptime"}),
        dig=[DigProbeConfig(name="www.example.test", rcode="REFUSED")],
    )
    assert container.pid is not None
    proc = Path(f"/proc/{container.pid}")
    fds_before = len(os.listdir(proc / "fd"))
    runner = TickRunner(build_samplers(cfg, lambda: container), run_tags={"soak": "d"})
    points = runner.run_tick(S)
    runner.close()
    fds_after = len(os.listdir(proc / "fd"))
    by = {p.measurement: p for p in points}
    assert "pdns_server" in (proc / "comm").read_text()
    rss_kib = next(
        int(line.split()[1])
        for line in (proc / "status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    process = by["process"].fields
    assert process["rss_bytes"] > 0
    assert abs(float(process["rss_bytes"]) / 1024 - rss_kib) <= 0.05 * rss_kib
    # the server opens descriptors as it answers the tick's own requests
    assert min(fds_before, fds_after) - 2 <= float(process["fds"]) <= max(fds_before, fds_after) + 2
    assert float(by["runtime"].fields["uptime_s"]) >= 0
    assert by["dig"].fields["ok"] == 1.0
