"""The proc sampler on a real container: its host PID's /proc, read from the host."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soak.samplers import TickRunner, build_samplers
from soak.samplers.config import DigProbeConfig, PromSamplerConfig, SamplersConfig
from soak.targets.base import Running
from tests.support.servers import free_port, wait_tcp

pytestmark = [pytest.mark.integration, pytest.mark.docker]

IMAGE = "soak-test/pdns-auth:latest"
S = 1_000_000_000


def docker_client() -> Any:
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # no engine here: the test cannot run, and says why
        pytest.skip(f"no Docker engine: {exc}")
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.skip(f"image {IMAGE} absent (scripts/build-test-images.sh builds it)")
    return client


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
        try:
            wait_tcp(web_port, timeout_s=30)
        except RuntimeError:
            c.reload()
            raise AssertionError(f"{c.status}: {c.logs()[-2000:]!r}") from None
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
    deadline = time.monotonic() + 20
    while True:  # the webserver comes up just after the process starts
        runner = TickRunner(build_samplers(cfg, lambda: container), run_tags={"soak": "d"})
        points = runner.run_tick(S)
        runner.close()
        if {"runtime", "dig"} <= {p.measurement for p in points} or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    by = {p.measurement: p for p in points}
    assert container.pid is not None
    proc = Path(f"/proc/{container.pid}")
    assert "pdns_server" in (proc / "comm").read_text()
    rss_kib = next(
        int(line.split()[1])
        for line in (proc / "status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    process = by["process"].fields
    assert process["rss_bytes"] > 0
    assert abs(float(process["rss_bytes"]) / 1024 - rss_kib) <= 0.05 * rss_kib
    assert abs(float(process["fds"]) - len(os.listdir(proc / "fd"))) <= 2
    assert float(by["runtime"].fields["uptime_s"]) >= 0
    assert by["dig"].fields["ok"] == 1.0
