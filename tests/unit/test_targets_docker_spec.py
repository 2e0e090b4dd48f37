"""The docker runtime's container spec, built from config without an engine."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import TypeAdapter

from soak.errors import InputError
from soak.placeholders import Placeholders
from soak.runs.layout import TargetFiles
from soak.targets.container import DockerRuntime
from soak.targets.specs import DockerTarget, TargetConfig

SPEC = """
name: pdns
runtime: docker
image: soak-test/pdns-auth
command: ["--local-port={port.dns}"]
environment: {DATA: "{data_dir}"}
ports: {dns: {container: 5300, protocol: both}, api: {container: 8081}}
volume: {mount: /var/lib/powerdns}
mounts: [{source: "{run_dir}/pdns.conf", target: /etc/powerdns/pdns.conf, read_only: true}]
read_only: true
tmpfs: [/tmp]
cap_drop: [ALL]
no_new_privileges: true
mem_limit: 64MiB
nofile: 4096
cpuset: "1"
"""


def runtime(tmp: Path, spec: str = SPEC, **kwargs: object) -> DockerRuntime:
    cfg = TypeAdapter(TargetConfig).validate_python(yaml.safe_load(spec))
    assert isinstance(cfg, DockerTarget)
    return DockerRuntime(cfg, files=TargetFiles(tmp), run_id="r 1", base_dir=tmp, **kwargs)  # type: ignore[arg-type]


def test_create_kwargs_bridge(tmp_path: Path) -> None:
    rt = runtime(tmp_path)
    values = Placeholders(
        run_dir=str(tmp_path),
        host="127.0.0.1",
        ports={"dns": 40000, "api": 40001},
        data_dir="/var/lib/powerdns",
    )
    kwargs = rt.spec.create_kwargs(values, values.ports, "vol-1", host_net=False)
    assert kwargs["name"] == "soak-r-1-pdns"
    assert kwargs["command"] == ["--local-port=40000"]
    assert kwargs["environment"] == {"DATA": "/var/lib/powerdns"}
    assert kwargs["ports"] == {
        "5300/tcp": ("127.0.0.1", 40000),
        "5300/udp": ("127.0.0.1", 40000),
        "8081/tcp": ("127.0.0.1", 40001),
    }
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == 64 * 1024**2
    assert kwargs["security_opt"] == ["no-new-privileges"] and kwargs["cap_drop"] == ["ALL"]
    assert kwargs["read_only"] and kwargs["tmpfs"] == {"/tmp": ""} and kwargs["init"]
    assert kwargs["cpuset_cpus"] == "1"
    assert [(u["Name"], u["Soft"], u["Hard"]) for u in kwargs["ulimits"]] == [
        ("nofile", 4096, 4096)
    ]
    bind, volume = kwargs["mounts"]
    assert bind["Source"] == f"{tmp_path}/pdns.conf" and bind["ReadOnly"]
    assert volume["Source"] == "vol-1" and volume["Target"] == "/var/lib/powerdns"
    assert kwargs["labels"]["soak.run"] == "r 1" and kwargs["labels"]["soak.target"] == "pdns"


def test_host_network_ports_default_to_the_container_port(tmp_path: Path) -> None:
    rt = runtime(tmp_path, SPEC + "network: host\n")
    specs = rt.spec.host_port_specs(host_net=True)
    assert specs["dns"].host == 5300 and specs["api"].host == 8081
    kwargs = rt.spec.create_kwargs(
        Placeholders(
            run_dir="/r", host="127.0.0.1", ports={"dns": 5300, "api": 8081}, data_dir="/d"
        ),
        {"dns": 5300, "api": 8081},
        None,
        host_net=True,
    )
    assert kwargs["network_mode"] == "host" and "ports" not in kwargs


def test_volume_name_needs_a_volume(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no `volume`"):
        runtime(tmp_path, "{name: x, runtime: docker, image: i}", volume_name="v")
