"""targets: rendered files, exit info, engine stats, state, cleanup rules."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from soak.errors import InputError
from soak.labels import owner_label, parse_owner
from soak.placeholders import Placeholders
from soak.procfs import start_ticks
from soak.targets.base import ExitInfo, Running
from soak.targets.cleanup import is_stale, left_because, owner_gone
from soak.targets.common import quote_tail, safe_name, tail_lines
from soak.targets.docker_engine import exit_info_from_state, process_fields_from_stats
from soak.targets.process import exit_info_from_returncode
from soak.targets.readiness import default_probes, fd_limit_warning
from soak.targets.render import file_dest, write_files
from soak.targets.specs import DnsProbe, PortSpec, RenderedFile, TargetConfig, TcpProbe

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "targets"
VALUES = Placeholders(run_dir="/runs/r1", host="127.0.0.1", ports={"dns": 5300}, data_dir="/d")


def test_write_files_template_relative_to_base_and_dest_confined(tmp_path: Path) -> None:
    base, run = tmp_path / "scenario", tmp_path / "run"
    base.mkdir()
    (base / "srv.conf.tmpl").write_text("port={port.dns}\n")
    spec = RenderedFile(dest="conf/srv.conf", template=Path("srv.conf.tmpl"), mode=0o600)
    [written] = write_files([spec], VALUES, run, base)
    assert written.read_text() == "port=5300\n" and written.stat().st_mode & 0o777 == 0o600
    with pytest.raises(InputError, match="inside the run directory"):
        file_dest(RenderedFile(dest="../escape", content="x"), run)
    with pytest.raises(InputError, match="exactly one"):
        write_files([RenderedFile(dest="a")], VALUES, run, base)


def test_fd_limit_warning_only_below_what_the_load_needs() -> None:
    """A limit is weighed against the load's connections and the server's own files: a
    1,024 limit under a UDP load (no connections) or without a load says nothing."""
    assert fd_limit_warning("t", 1024, connections=0) is None
    assert fd_limit_warning("t", 1024, connections=None) is None
    assert fd_limit_warning("t", 1024, connections=768) is None  # 768 + 256 fit
    warning = fd_limit_warning("t", 1024, connections=2048)
    assert warning is not None and "open-files limit is 1024, below the 2304" in warning
    assert "ulimit -n 65536" in warning and "LimitNOFILE=65536" in warning  # what to do
    docker = fd_limit_warning("t", 1024, "docker", connections=100_000)
    assert docker is not None and "`nofile: 100256`" in docker
    assert fd_limit_warning("t", None, connections=10**6) is None


def test_exit_info_from_returncode_and_engine_state() -> None:
    assert exit_info_from_returncode(-9) == ExitInfo(None, signal=9)
    assert exit_info_from_returncode(3) == ExitInfo(3)
    assert exit_info_from_state({"Status": "running", "Running": True}) is None
    oom = exit_info_from_state({"Status": "exited", "ExitCode": 137, "OOMKilled": True})
    assert oom == ExitInfo(137, signal=9, oom_killed=True) and oom.describe() == "OOM-killed"
    assert exit_info_from_state({"Status": "exited", "ExitCode": 2}) == ExitInfo(2)
    assert ExitInfo(None).describe() == "exited (code unknown)"


def test_process_fields_from_engine_stats() -> None:
    stats = json.loads((FIXTURES / "docker-stats-v1.json").read_text())
    assert process_fields_from_stats(stats) == {
        "rss_bytes": 52428800.0 - 10485760.0,
        "rss_anon_bytes": 40000000.0,
        "cpu_user_s": 2.5,
        "cpu_system_s": 1.0,
        "threads": 7.0,
        "read_bytes": 4096.0,
        "write_bytes": 8192.0,
    }
    assert process_fields_from_stats({}) == {}


def test_running_state_round_trips_through_json() -> None:
    running = Running(
        name="t",
        host="127.0.0.1",
        ports={"dns": 5300},
        pid=42,
        log_path=Path("/r/t.log"),
        data_dir=Path("/r/d"),
        ready_after_s=0.4,
        conditions_s={"list": 2.6},
        runtime="process",
    )
    state = json.loads(json.dumps(running.to_state()))
    assert Running.from_state(state) == running
    assert Running.from_state({**state, "future_field": 1}).pid == 42


def test_default_probes_follow_the_ports() -> None:
    probes = default_probes({"dns": PortSpec(protocol="udp"), "api": PortSpec()})
    assert probes[0] == DnsProbe(kind="dns", port="dns", name=".", type="SOA", rcode=None)
    assert probes[1] == TcpProbe(kind="tcp", port="api")


def test_cleanup_rules() -> None:
    dead = "nohost-xyz:1:5"  # another host: never judged gone from here
    assert not owner_gone(dead)
    # No owner label, or one that cannot be read: never judged gone.
    assert not owner_gone(None) and not owner_gone("") and not owner_gone("x:y")
    labels = {"soak.run": "r1", "soak.owner": dead}
    assert is_stale(labels, "r1", ())
    assert not is_stale(labels, "r2", ())
    assert not is_stale(labels, None, ())
    assert not is_stale({"soak.run": "r1"}, None, ("r1",))
    assert not is_stale({}, None, ())
    assert not is_stale({"soak.run": "r1"}, None, ())  # no owner: left, and named
    here, me = socket.gethostname(), os.getpid()
    assert owner_label() == f"{here}:{me}:{start_ticks(me)}"
    assert parse_owner(owner_label()) == (here, me, start_ticks(me))
    assert parse_owner(f"{here}:{me}") == (here, me, None)  # an older soak's: the pid only
    assert not owner_gone(owner_label()) and not owner_gone(f"{here}:{me}")
    # The same pid with another start time: a later process, the owner is gone.
    assert owner_gone(f"{here}:{me}:{(start_ticks(me) or 0) + 1}")
    assert owner_gone(f"{here}:{2**22 + 7}:1") and owner_gone(f"{here}:{2**22 + 7}")
    assert left_because(None) == "no owner label"
    assert left_because(owner_label()) == f"its owner lives (pid {me})"
    # a swarm task's container is judged by its own owner label, as any other
    live = {"soak.run": "r1", "soak.owner": owner_label()}
    assert not is_stale({**live, "com.docker.swarm.service.id": "abc"}, None, ())


def test_tail_and_quote(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)) + "\n\n")
    assert tail_lines(log, 3) == ["line 97", "line 98", "line 99"]
    assert tail_lines(tmp_path / "missing") == []
    assert quote_tail(["a", "b"]) == "last log lines: a | b"
    assert safe_name("my target/1") == "my-target-1"


def test_target_config_parses_each_runtime() -> None:
    adapter: TypeAdapter[object] = TypeAdapter(TargetConfig)
    cfg = adapter.validate_python(
        {"runtime": "docker", "image": "x", "mem_limit": "16MiB", "ready": {"interval_s": "50ms"}}
    )
    assert cfg.mem_limit == 16 * 1024**2 and cfg.ready.interval_s == 0.05  # type: ignore[attr-defined]
    with pytest.raises(ValidationError):
        adapter.validate_python({"runtime": "process", "argv": []})


def test_a_stop_soak_asked_for_is_stopped_not_killed() -> None:
    from soak.targets.base import ExitInfo

    assert ExitInfo(None, signal=15, requested=True).describe() == "stopped"
    assert ExitInfo(143, signal=15, requested=True).describe() == "stopped"  # docker stop
    assert ExitInfo(0, requested=True).describe() == "stopped"
    assert ExitInfo(1, requested=True).describe() == "stopped (exited with code 1)"
    assert ExitInfo(None, signal=9, requested=True).describe() == (
        "stopped (killed: it did not exit within its stop timeout)"
    )
    # Not asked for: how it ended, as before.
    assert ExitInfo(None, signal=15).describe() == "killed by signal 15"
    assert ExitInfo(None, signal=9).describe() == "killed by signal 9"
