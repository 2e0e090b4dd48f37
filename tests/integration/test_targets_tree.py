"""A process target's whole tree: daemons that fork away, the parent-death signal, and the
start-failure line, with the real dnsmasq and unbound."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from soak.errors import TargetStartError
from soak.procfs import pid_alive
from soak.runs.layout import TargetFiles
from soak.targets import Target, build_target
from soak.targets.specs import TargetConfig
from soak.targets.tree import Mark, marked, pids_of
from tests.support.servers import DEFAULT_LOCAL_DATA, unbound_conf
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

RUN_ID = "t-tree"


def built(tmp: Path, spec: dict[str, Any], run_id: str = RUN_ID) -> Target:
    cfg = TypeAdapter(TargetConfig).validate_python({"runtime": "process", **spec})
    return build_target(cfg, files=TargetFiles(tmp / "run"), run_id=run_id, base_dir=tmp)


def start_fails(t: Target) -> str:
    with pytest.raises(TargetStartError) as caught:
        t.start()
        t.wait_ready()
    message = str(caught.value)
    assert caught.value.exit_code == 2 and "\n" not in message
    return message


def forked_pid(message: str, binary: str) -> int:
    head = f"{binary} forked into the background (pid "
    assert head in message, message
    return int(message.split(head, 1)[1].split(")", 1)[0])


def test_dnsmasq_that_daemonizes_is_named_and_stopped(tmp_path: Path) -> None:
    dnsmasq = built(
        tmp_path,
        {
            "name": "upstream",
            "argv": [
                "dnsmasq", "--port={port.dns}", "--listen-address=127.0.0.1",
                "--bind-interfaces", "--no-resolv", "--no-hosts",
                "--address=/#/192.0.2.1", "--pid-file={data_dir}/dnsmasq.pid", "--user=root",
            ],
            "ports": {"dns": {"protocol": "both"}},
            "ready": {"probes": [{"kind": "dns", "name": "x.example", "answer": "192.0.2.1"}]},
        },
    )  # fmt: skip
    message = start_fails(dnsmasq)
    pid = forked_pid(message, "dnsmasq")
    assert message.startswith("upstream: dnsmasq forked into the background (pid ")
    assert "run it in the foreground (--no-daemon)" in message
    # The daemon was its own session's leader, out of the target's group: stopped anyway.
    assert not pid_alive(pid)
    assert pids_of(RUN_ID, "upstream") == []


def test_unbound_that_daemonizes_is_named_and_stopped(tmp_path: Path) -> None:
    conf = unbound_conf("{port.dns}", DEFAULT_LOCAL_DATA)  # type: ignore[arg-type]
    daemonizing = conf.replace("do-daemonize: no", "do-daemonize: yes")
    (tmp_path / "unbound.conf.tmpl").write_text(daemonizing)
    unbound = built(
        tmp_path,
        {
            "name": "resolver",
            "argv": ["unbound", "-c", "{run_dir}/unbound.conf"],
            "ports": {"dns": {"protocol": "both"}},
            "files": [{"dest": "unbound.conf", "template": "unbound.conf.tmpl"}],
            # An answer, not the default TCP accept: unbound listens before it forks, so
            # on a busy machine an accept can come while the parent is all there is.
            "ready": {
                "probes": [{"kind": "dns", "name": "www.example.test", "answer": "192.0.2.10"}]
            },
        },
    )
    message = start_fails(unbound)
    pid = forked_pid(message, "unbound")
    assert "run it in the foreground (-d" in message
    assert not pid_alive(pid)
    assert pids_of(RUN_ID, "resolver") == []


def test_unbound_bad_option_quotes_the_error_first_and_names_the_log(tmp_path: Path) -> None:
    unbound = built(
        tmp_path, {"name": "unbound", "argv": ["unbound", "-d", "-Z"], "ports": {"dns": {}}}
    )
    message = start_fails(unbound)
    log_path = tmp_path / "run" / "unbound.log"
    assert "unbound: exited with code 1 before it was ready" in message
    errors_at = message.index("log lines that look like errors: unbound: invalid option -- 'Z'")
    # The usage text that follows is the tail, after the error; the log file is named.
    assert errors_at < message.index("last log lines:")
    assert message.endswith(f"(log: {log_path})")
    assert "invalid option" in log_path.read_text()


def test_a_child_in_a_session_of_its_own_goes_with_the_target(tmp_path: Path) -> None:
    """A helper process that left the target's group (setsid) is stopped with it."""
    script = "setsid sleep 300 & exec sleep 300"
    t = built(tmp_path, {"name": "wrapper", "argv": ["sh", "-c", script]})
    t.start()
    try:
        running = t.wait_ready()
        sid = os.getsid(running.pid or 0)
        kids = wait_for(lambda: away(sid), 10.0, "a child in a session of its own")
    finally:
        t.stop()
    assert not any(pid_alive(p) for p in kids)
    assert pids_of(RUN_ID, "wrapper") == []


def away(sid: int) -> list[int]:
    """The target's processes in another session than `sid`."""
    found = []
    for pid in pids_of(RUN_ID, "wrapper"):
        try:
            if os.getsid(pid) != sid:
                found.append(pid)
        except ProcessLookupError:
            continue
    return found


STARTER = """
import sys
from pathlib import Path
from pydantic import TypeAdapter
from soak.targets import build_target
from soak.targets.specs import TargetConfig
from soak.runs.layout import TargetFiles
cfg = TypeAdapter(TargetConfig).validate_python(
    {"runtime": "process", "name": "orphan", "argv": ["sleep", "300"]})
here = Path(sys.argv[1])
t = build_target(cfg, files=TargetFiles(here), run_id=sys.argv[2], base_dir=here)
print(t.start().pid, flush=True)
sys.stdin.read()
"""


def test_a_target_dies_with_the_soak_process_that_started_it(tmp_path: Path) -> None:
    run_id = f"t-pdeath-{os.getpid()}"
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(tmp_path), run_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert starter.stdout is not None
        pid = int(starter.stdout.readline())
        mark = marked().get(pid)
        assert isinstance(mark, Mark) and mark.run_id == run_id and mark.data_dir is None
        assert mark.owner_pid == starter.pid
        starter.send_signal(signal.SIGKILL)
        starter.wait(10)
        wait_for(lambda: not pid_alive(pid), 10.0, "the target gone with its soak process")
    finally:
        if starter.poll() is None:
            starter.kill()
