"""The docker runtime against the real engine and the local test images.

Few and fast: each test starts at most two small containers. Every run id is
unique, and each test checks that nothing labelled with it is left behind.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import TypeAdapter

from soak.errors import TargetStartError
from soak.probes import dns_query, http_request
from soak.runs.layout import TargetFiles
from soak.targets import Target, build_target, cleanup_stale
from soak.targets.specs import TargetConfig
from tests.support.servers import unbound_conf
from tests.support.skips import docker_engine_fixture

pytestmark = [pytest.mark.integration, pytest.mark.docker]

IMAGES = ["soak-test/base:bookworm", "soak-test/pdns-auth", "soak-test/unbound"]
API_KEY = "soak-test-key"


engine = docker_engine_fixture(IMAGES)


@pytest.fixture
def run_id(engine: Any) -> Iterator[str]:
    rid = f"t-{uuid.uuid4().hex[:10]}"
    yield rid
    left = engine.containers.list(
        all=True, filters={"label": f"soak.run={rid}"}, ignore_removed=True
    )
    cleanup_stale(rid)
    assert not left, f"containers left behind: {[c.name for c in left]}"


def make(tmp: Path, run_id: str, spec: str, **kwargs: Any) -> Target:
    cfg = TypeAdapter(TargetConfig).validate_python(yaml.safe_load(spec))
    return build_target(cfg, files=TargetFiles(tmp / "run"), run_id=run_id, base_dir=tmp, **kwargs)


PDNS = """
name: pdns
runtime: docker
image: soak-test/pdns-auth
ports: {dns: {container: 5300, protocol: both}, api: {container: 8081}}
volume: {mount: /var/lib/powerdns}
read_only: true
tmpfs: [/tmp]
cap_drop: [ALL]
no_new_privileges: true
nofile: 4096
stop_timeout_s: 5
ready:
  timeout_s: 30
  probes:
    - {kind: http, port: api, path: /api/v1/servers/localhost, headers: {X-API-Key: soak-test-key}}
    - {kind: dns, name: example.test., type: SOA, rcode: REFUSED}
"""


def unbound_spec(answer: str, more: str) -> str:
    """The unbound image, ready when www.example.test. answers `answer` (192.0.2.10 with the
    image's own config); `more`: the spec's other keys."""
    return f"""
name: unbound
runtime: docker
image: soak-test/unbound
ready:
  probes: [{{kind: dns, name: www.example.test., answer: {answer}}}]
{more}"""


def labelled(engine: Any, run_id: str) -> tuple[list[Any], list[Any]]:
    label = {"label": f"soak.run={run_id}"}
    return engine.containers.list(
        all=True, filters=label, ignore_removed=True
    ), engine.volumes.list(filters=label)


def test_pdns_hardened_container_fresh_volume_reused_by_next_version(
    engine: Any, run_id: str, tmp_path: Path
) -> None:
    old = make(tmp_path, run_id, PDNS)
    old.start()
    running = old.wait_ready()
    try:
        attrs = engine.api.inspect_container(running.container_id)
        host_config = attrs["HostConfig"]
        assert host_config["ReadonlyRootfs"] and host_config["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in host_config["SecurityOpt"] and host_config["Init"]
        bindings = [b for bs in host_config["PortBindings"].values() for b in bs]
        assert len(bindings) == 3 and {b["HostIp"] for b in bindings} == {"127.0.0.1"}
        assert attrs["Config"]["Labels"]["soak.run"] == run_id
        # The host PID is the server itself (init's child), readable through /proc.
        assert running.pid is not None
        assert Path(f"/proc/{running.pid}/comm").read_text().strip() == "pdns_server"
        # 4,096 files and no load to serve: no open-files warning (it is given only below
        # what a run's load needs, soak.targets)
        assert running.fd_limit == 4096 and running.warnings == []
        assert running.ready_after_s is not None and running.ready_after_s > 0
        base = f"http://127.0.0.1:{running.ports['api']}/api/v1/servers/localhost"
        zone = {"name": "up.test.", "kind": "Native", "nameservers": ["ns.up.test."]}
        made = http_request("POST", f"{base}/zones", headers={"X-API-Key": API_KEY}, json=zone)
        assert made.status == 201, made.body
        assert dns_query(*running.address("dns"), "up.test.", "SOA").rcode == "NOERROR"
    finally:
        info = old.stop()
    assert info is not None and info.signal == 15 and not info.oom_killed
    assert running.log_path is not None and "ready to distribute" in running.log_path.read_text()
    containers, volumes = labelled(engine, run_id)
    assert containers == [] and [v.name for v in volumes] == [running.volume]

    # The next version starts on the same volume: the zone is still there.
    new = make(
        tmp_path, run_id, PDNS.replace("name: pdns", "name: pdns-new"), volume_name=running.volume
    )
    new.start()
    try:
        again = new.wait_ready()
        assert again.volume == running.volume
        assert dns_query(*again.address("dns"), "up.test.", "SOA").rcode == "NOERROR"
    finally:
        new.stop()
    assert cleanup_stale(run_id) == 1  # the volume
    assert labelled(engine, run_id) == ([], [])


def test_host_network_rendered_config_bind_mounted(
    engine: Any, run_id: str, tmp_path: Path
) -> None:
    conf = unbound_conf("{port.dns}", ["www.example.test. 60 IN A 192.0.2.77"])  # type: ignore[arg-type]
    mount = {"source": "{run_dir}/unbound.conf", "target": "/etc/unbound/soak.conf"}
    more = yaml.safe_dump(
        {
            "network": "host",
            "user": "root",
            "ports": {"dns": {"protocol": "both"}},
            "files": [{"dest": "unbound.conf", "content": conf}],
            "mounts": [{**mount, "read_only": True}],
        }
    )
    target = make(tmp_path, run_id, unbound_spec("192.0.2.77", more))
    target.start()
    try:
        running = target.wait_ready()
        host_config = engine.api.inspect_container(running.container_id)["HostConfig"]
        assert host_config["NetworkMode"] == "host"
        assert running.pid is not None
        assert Path(f"/proc/{running.pid}/comm").read_text().strip() == "unbound"
    finally:
        info = target.stop()
    assert info is not None and info.exit_code == 0  # docker-init passed SIGTERM on; clean exit


def test_oom_killed_container_is_reported(engine: Any, run_id: str, tmp_path: Path) -> None:
    spec = """
name: hog
runtime: docker
image: soak-test/base:bookworm
command: [tail, /dev/zero]
mem_limit: 16MiB
"""
    target = make(tmp_path, run_id, spec)
    target.start()
    try:
        deadline_s = time.monotonic() + 30
        while (info := target.poll()) is None and time.monotonic() < deadline_s:
            time.sleep(0.1)
    finally:
        target.stop()
    assert info is not None and info.oom_killed, info
    assert info.describe() == "OOM-killed"


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_cleanup_removes_what_gone_runs_left(engine: Any, run_id: str) -> None:
    host = socket.gethostname()
    dead, alive, kept = f"{run_id}-dead", run_id, f"{run_id}-kept"
    owners = {dead: f"{host}:{dead_pid()}", alive: f"{host}:{os.getpid()}"}
    owners[kept] = owners[dead]
    for rid, owner in owners.items():
        labels = {"soak.run": rid, "soak.target": "t", "soak.owner": owner}
        engine.containers.create("soak-test/base:bookworm", ["sleep", "60"], labels=labels)
        engine.volumes.create(name=f"soak-{rid}", labels=labels)
    try:
        assert cleanup_stale(keep_runs=[kept]) >= 2  # other gone runs' leftovers may go too
        assert labelled(engine, dead) == ([], [])
        for rid in (alive, kept):
            containers, volumes = labelled(engine, rid)
            assert len(containers) == 1 and len(volumes) == 1
        assert cleanup_stale(kept) == 2
    finally:
        cleanup_stale(dead)
        cleanup_stale(kept)
        cleanup_stale(alive)


# ---------------------------------------------------------------- bad input


def fails(target: Target) -> str:
    with pytest.raises(TargetStartError) as caught:
        target.start()
        target.wait_ready()
    assert caught.value.exit_code == 2 and "\n" not in str(caught.value)
    return str(caught.value)


def test_missing_image(engine: Any, run_id: str, tmp_path: Path) -> None:
    spec = "{name: x, runtime: docker, image: 'soak-test/no-such-image:1'}"
    assert "image soak-test/no-such-image:1 not found" in fails(make(tmp_path, run_id, spec))
    assert labelled(engine, run_id) == ([], [])


def test_port_taken_and_never_ready_leave_nothing(engine: Any, run_id: str, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = PDNS.replace("api: {container: 8081}", f"api: {{container: 8081, host: {port}}}")
        message = fails(make(tmp_path, run_id, taken))
    assert f"port api (127.0.0.1:{port}/tcp) is already in use" in message
    assert labelled(engine, run_id) == ([], [])

    never = PDNS.replace("timeout_s: 30", "timeout_s: 4").replace(
        "path: /api/v1/servers/localhost,", "path: /no/such/page,"
    )
    message = fails(make(tmp_path, run_id, never))
    assert "not ready after 4 s" in message and "HTTP 40" in message
    assert "last log lines:" in message and "distribute questions" in message
    assert labelled(engine, run_id) == ([], [])


def test_restart_then_reattach_after_a_service_restart(
    engine: Any, run_id: str, tmp_path: Path
) -> None:
    spec = unbound_spec(
        "192.0.2.10", "ports: {dns: {container: 5300, protocol: both}}\non_exit: restart"
    )
    first = make(tmp_path, run_id, spec)
    first.start()
    try:
        running = first.wait_ready()
        container_id, port, pid = running.container_id, running.ports["dns"], running.pid
        again = first.restart()
        assert again.restarts == 1 and again.container_id == container_id
        assert first.wait_ready().ports["dns"] == port and again.pid != pid

        # A new soak service process adopts the live container from the saved state.
        adopted = make(tmp_path, run_id, spec)
        state = again.to_state()
        assert adopted.attach(state).container_id == container_id
        assert adopted.poll() is None
        assert dns_query("127.0.0.1", port, "www.example.test.").answers == ["192.0.2.10"]
        # The engine's stats: what samplers use when /proc does not show the container.
        fields = adopted.stats_fields()  # type: ignore[attr-defined]
        assert fields["rss_bytes"] > 1024**2 and fields["threads"] >= 1
        assert fields["cpu_user_s"] + fields["cpu_system_s"] > 0
        assert adopted.stop() is not None
    finally:
        first.stop()
    assert labelled(engine, run_id) == ([], [])
