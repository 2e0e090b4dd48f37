"""A release candidate before its image exists: the new version is a locally built
binary (here the host's unbound), the old one a released image (soak-test/unbound:1.13).

They share the data through a host directory that the container gets at its
`volume.mount`: what the old container wrote there, the local binary finds in its
`{data_dir}`. The load through the swap keeps its address: the process listens on the
port the container published.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.servers import UNBOUND_FOREGROUND, unbound_process_target
from tests.support.skips import docker_skip_reason
from tests.support.upgrades import docker_leftovers, run_plan

# The old version's image is a versioned one: built by `make test-upgrades`, run there.
pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.upgrades]

IMAGE = "soak-test/unbound:1.13"
MOUNT = "/var/lib/soak-unbound"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="module")
def _needs() -> None:
    """Asked only when a test of this module runs (`make test` deselects them)."""
    if shutil.which("unbound") is None:
        pytest.skip("unbound is not installed on this host")
    if (reason := docker_skip_reason([IMAGE], "scripts/build-test-images.sh upgrades")) is not None:
        pytest.skip(reason)


# The shipped plan's server section (the same answers), listening where each runtime needs.
SERVER = (
    "server:\n"
    + UNBOUND_FOREGROUND
    + """    logfile: ""
    interface: {interface}
    port: {port}
    num-threads: 1
    do-ip6: no
    access-control: 0.0.0.0/0 allow
    local-zone: "." refuse
    local-zone: "example.test." static
    local-data: "example.test. 3600 IN SOA ns1.example.test. hm.example.test. 1 3600 600 86400 60"
    local-data: "www.example.test. 3600 IN A 192.0.2.10"
remote-control:
    control-enable: no
"""
)
WWW = "192.0.2.10"
PROBE = {"kind": "dns", "name": "www.example.test", "type": "A", "answer": WWW}
CONF = "/etc/unbound/soak.conf"
LOAD = {"rate_qps": 200, "mix": [{"name": "www", "queries": ["www.example.test A"]}]}


def plan_file(tmp_path: Path) -> Path:
    old = {
        "runtime": "docker",
        "name": "unbound",
        "image": IMAGE,
        "version": "1.13",
        "ports": {"dns": {"container": 5300, "protocol": "both"}},
        "volume": {"mount": MOUNT},
        "files": [
            {"dest": "unbound.conf", "content": SERVER.format(interface="0.0.0.0@5300", port=5300)}
        ],
        "mounts": [{"source": "{run_dir}/unbound.conf", "target": CONF, "read_only": True}],
        "ready": {"timeout_s": 60, "probes": [PROBE]},
    }
    conf = SERVER.format(interface="127.0.0.1@{port.dns}", port="{port.dns}")
    new = {
        **unbound_process_target(conf=conf),
        "version": "local build",
        "ready": {"timeout_s": 30, "probes": [PROBE]},
    }
    write_marker = ["sh", "-c", f"echo written-by-1.13 > {MOUNT}/marker"]
    plan = {
        "name": "unbound-image-to-local-binary",
        "old": old,
        "new": new,
        # the image's server runs as its own user: the host directory is chowned to it
        "data": {"owner": "unbound:unbound"},
        "populate": [{"kind": "command", "argv": write_marker}],
        "load": {**LOAD, "settle_s": 1},
        "checks": [
            {"name": "www A", "kind": "dig", "qname": "www.example.test", "answers": [WWW]},
            {"name": "the old data", "kind": "command", "argv": ["cat", "{data_dir}/marker"],
             "stdout_contains": ["written-by-1.13"]},
            {"name": "back under load", "kind": "swap", "max_gap_s": 10},
        ],
    }  # fmt: skip
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


def test_a_local_binary_runs_on_the_data_an_old_image_wrote(tmp_path: Path, work: Path) -> None:
    run_id = f"t{secrets.token_hex(3)}"
    result, lines = run_plan(plan_file(tmp_path), [], work, run_id=run_id)
    failed = {c.name: c.message for c in result.checks if c.status != "pass"}
    assert failed == {}, "\n".join(lines)
    assert result.exit_code == 0 and len(result.checks) == 4  # 3 checks, the probe's answer
    steps = [f"{s.phase} {s.text}" for s in result.steps]
    assert "old starting unbound 1.13" in steps and "new starting unbound local build" in steps
    # the load kept its address through the swap: container port, then process port
    assert result.swap is not None and result.swap.completed > 0
    assert docker_leftovers(run_id) == ([], [])
    assert not (work / "run").exists()
