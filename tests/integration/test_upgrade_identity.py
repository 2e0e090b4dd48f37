"""Which server each version really was: the binary (path, sha256) of a process version
or the image (id, digests) of a docker one, and the version the server reports itself,
in the terminal, the JSON and the JUnit properties. Real unbound: the host's binary, then
the test image."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from soak.upgrade.report import junit_xml, to_json
from tests.support.servers import UNBOUND_FOREGROUND, unbound_process_target
from tests.support.skips import docker_engine
from tests.support.upgrades import SCENARIOS, run_plan

pytestmark = pytest.mark.integration

UNBOUND = shutil.which("unbound")
if UNBOUND is None and os.environ.get("CI") != "true":
    pytest.skip("unbound is not installed on this host", allow_module_level=True)
IMAGE = "soak-test/unbound:latest"
SERVER_VERSION = {"argv": ["unbound", "-V"], "match": r"^Version (\S+)"}

CONF = (
    "server:\n"
    + UNBOUND_FOREGROUND
    + """    interface: 127.0.0.1@{port.dns}
    port: {port.dns}
    do-ip6: no
    local-zone: "example.test." static
    local-data: "www.example.test. 3600 IN A 192.0.2.10"
remote-control:
    control-enable: no
"""
)


def process_server(label: str) -> dict[str, Any]:
    return {
        **unbound_process_target(conf=CONF),
        "version": label,
        "ready": {"timeout_s": 10, "probes": [{"kind": "dns", "name": "www.example.test"}]},
    }


def write(tmp_path: Path, plan: dict[str, Any]) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def properties(result: Any) -> dict[str, str]:
    root = ET.fromstring(junit_xml(result))
    return {p.get("name", ""): p.get("value", "") for p in root.iter("property")}


def test_a_process_version_records_its_binary_and_the_version_it_reports(
    tmp_path: Path, work: Path
) -> None:
    assert UNBOUND is not None
    said = subprocess.run([UNBOUND, "-V"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"^Version (\S+)", said, re.M)
    assert m, said
    real = m.group(1)
    plan = {
        "name": "identity",
        "old": process_server(real),
        "new": process_server("1.26"),  # a label the binary is not: shown, not hidden
        "server_version": SERVER_VERSION,
        "checks": [{"name": "www", "kind": "dig", "qname": "www.example.test"}],
    }
    result, lines = run_plan(write(tmp_path, plan), [], work)
    assert result.exit_code == 0, lines
    sha = hashlib.sha256(Path(UNBOUND).read_bytes()).hexdigest()
    new = to_json(result)["versions"]["new"]
    assert (new["binary"], new["binary_sha256"], new["reported_version"]) == (UNBOUND, sha, real)
    # the terminal: the old version is what its label says; the new one is not
    old_line = next(ln for ln in lines if ln.startswith("old") and "reports version" in ln)
    new_line = next(ln for ln in lines if ln.startswith("new") and "reports version" in ln)
    assert f"binary {UNBOUND} (sha256 {sha[:12]})" in old_line and "not the plan" not in old_line
    assert f"reports version '{real}'; not the plan's '1.26'" in new_line
    props = properties(result)
    assert (props["new_reported_version"], props["new_binary_sha256"]) == (real, sha)


def test_a_docker_version_records_its_image_id(tmp_path: Path, work: Path) -> None:
    engine = docker_engine([IMAGE])
    image = engine.images.get(IMAGE)
    shipped = yaml.safe_load((SCENARIOS / "unbound-to-1.26.yaml").read_text())
    server = {**shipped["old"], "image": IMAGE, "version": "latest"}
    plan = {
        "name": "identity-docker",
        "old": server,
        "new": server,
        "server_version": SERVER_VERSION,
        "checks": [{"name": "www", "kind": "dig", "qname": "www.example.test"}],
    }
    result, lines = run_plan(write(tmp_path, plan), [], work)
    assert result.exit_code == 0, lines
    said = engine.containers.run(IMAGE, ["unbound", "-V"], remove=True).decode()
    m = re.search(r"^Version (\S+)", said, re.M)
    assert m, said
    for side in ("old", "new"):
        ident = to_json(result)["versions"][side]
        assert (ident["image"], ident["image_id"]) == (IMAGE, image.id)
        assert ident["digests"] == list(image.attrs.get("RepoDigests") or [])
        assert ident["reported_version"] == m.group(1)
    assert properties(result)["new_image_id"] == image.id
    assert any(f"image {IMAGE} ({image.id[:19]}" in ln for ln in lines), lines
