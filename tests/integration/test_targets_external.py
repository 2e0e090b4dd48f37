"""The external runtime: a server soak did not start is probed, sampled, never stopped."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import TypeAdapter

from soak.errors import InputError, TargetStartError, UnsafeTargetError
from soak.runs.layout import TargetFiles
from soak.runs.runid import new_run_id
from soak.targets import Target, build_target
from soak.targets.specs import TargetConfig
from tests.support.servers import unbound

pytestmark = pytest.mark.integration

ANSWER = "192.0.2.10"


def external(tmp: Path, **fields: object) -> Target:
    cfg = TypeAdapter(TargetConfig).validate_python({"runtime": "external", **fields})
    return build_target(
        cfg, files=TargetFiles(tmp / "run"), run_id=new_run_id("t-ext"), base_dir=tmp
    )


def test_external_by_pidfile_is_probed_and_seen_gone(tmp_path: Path) -> None:
    with unbound(tmp_path) as server:
        (tmp_path / "server.pid").write_text(f"{server.pid}\n")
        target = external(
            tmp_path,
            name="running-unbound",
            pidfile="server.pid",  # relative to the scenario's directory
            ports={"dns": {"host": server.port, "protocol": "udp"}},
            ready={"probes": [{"kind": "dns", "name": "www.example.test.", "answer": ANSWER}]},
        )
        running = target.start()
        assert running.pid == server.pid and running.ports == {"dns": server.port}
        assert target.wait_ready().fd_limit is not None
        assert target.stop() is None and target.poll() is None
        assert server.proc.poll() is None  # stop() left it alone
    info = target.poll()
    assert info is not None and info.describe() == "exited (code unknown)"
    with pytest.raises(TargetStartError, match="cannot be restarted"):
        target.restart()


def test_external_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="external ports need `host`: dns"):
        external(tmp_path, ports={"dns": {}})
    with pytest.raises(UnsafeTargetError):
        external(tmp_path, host="192.0.2.1", ports={"dns": {"host": 53}})
    target = external(tmp_path, pidfile="missing.pid", ports={"dns": {"host": 53}})
    with pytest.raises(TargetStartError, match="no PID in pidfile") as caught:
        target.start()
    assert caught.value.exit_code == 2
