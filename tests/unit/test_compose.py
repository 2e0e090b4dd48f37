"""docker-compose.yml: accepted by docker-compose (the Debian package), loopback-only
ports, grafana/ provisioned, the soak service built from docker/service/Dockerfile."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from soak.config import load_scenario

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


def _compose_config(
    path: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`docker-compose config -q` of the file at path, run in its directory."""
    return subprocess.run(
        ["docker-compose", "-f", str(path), "config", "-q"],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")
def test_docker_compose_config_accepts_the_file() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOAK_", "GRAFANA_"))}
    r = _compose_config(COMPOSE, env)
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")
def test_docker_compose_config_rejects_a_broken_file(tmp_path: Path) -> None:
    """The check above can fail: a service with an unknown key is refused."""
    data = _compose()
    data["services"]["grafana"]["portz"] = ["3000:3000"]
    bad = tmp_path / "docker-compose.yml"
    bad.write_text(yaml.safe_dump(data))
    r = _compose_config(bad)
    assert r.returncode != 0


def test_published_ports_are_loopback_only() -> None:
    for name, svc in _compose()["services"].items():
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)
        if "ports" not in svc:
            assert svc.get("network_mode") in (None, "host"), name


def test_influxdb_is_initialised_from_the_environment() -> None:
    env = _compose()["services"]["influxdb"]["environment"]
    assert env["DOCKER_INFLUXDB_INIT_MODE"] == "setup"
    for key in ("ORG", "BUCKET", "ADMIN_TOKEN", "USERNAME", "PASSWORD"):
        assert env[f"DOCKER_INFLUXDB_INIT_{key}"].startswith("${SOAK_"), key


def test_grafana_is_provisioned_from_the_repository() -> None:
    svc = _compose()["services"]["grafana"]
    assert "./grafana/provisioning:/etc/grafana/provisioning:ro" in svc["volumes"]
    # The datasource file reads these; the bucket is the InfluxQL database (DBRP).
    for key in ("SOAK_INFLUX_URL", "SOAK_INFLUX_DB", "SOAK_INFLUX_TOKEN"):
        assert key in svc["environment"]
        assert "${" + key + "}" in (ROOT / "grafana/provisioning/datasources/soak.yaml").read_text()


def test_soak_service_builds_from_its_dockerfile_with_the_docker_socket() -> None:
    svc = _compose()["services"]["soak"]
    assert svc["build"]["dockerfile"] == "docker/service/Dockerfile"
    assert svc["build"]["args"]["BASE"] == "${SOAK_BASE_IMAGE:-soak-test/base:bookworm}"
    assert "/var/run/docker.sock:/var/run/docker.sock" in svc["volumes"]
    assert "./scenarios:/work/scenarios:ro" in svc["volumes"]
    dockerfile = (ROOT / "docker" / "service" / "Dockerfile").read_text()
    assert "ARG BASE=soak-test/base:bookworm" in dockerfile
    assert "FROM ${BASE}" in dockerfile


def test_example_target_forwards_to_the_dnsmasq_upstream() -> None:
    services = _compose()["services"]
    upstream = services["upstream"]
    port = next(a for a in upstream["command"] if a.startswith("--port=")).split("=")[1]
    recursor = services["recursor"]
    assert "pdns-recursor" in recursor["image"]
    assert f"--forward-zones-recurse=.=127.0.0.1:{port}" in recursor["command"]


def test_example_scenario_is_valid_and_points_at_the_compose_target() -> None:
    scenario = load_scenario(ROOT / "scenarios" / "compose-recursor.yaml")
    services = _compose()["services"]
    assert scenario.target.runtime == "external"
    assert scenario.target.container == services["recursor"]["container_name"]
    dns = scenario.target.ports["dns"].host
    assert f"--local-port={dns}" in services["recursor"]["command"]
    sink = next(s for s in scenario.sinks if s.kind == "influx_v2")
    assert sink.bucket == "soak" and sink.token_env == "SOAK_INFLUX_TOKEN"
    assert "SOAK_INFLUX_TOKEN" in services["soak"]["environment"]
