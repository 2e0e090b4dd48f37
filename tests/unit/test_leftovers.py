"""What a dead run left, how it is recognised, and how a start failure is quoted (pure)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from soak.procfs import parse_environ_value
from soak.runs.leftovers import Swept, left_agent_runs, stale_agent_runs
from soak.targets.base import ExitInfo
from soak.targets.common import error_lines, quote_tail
from soak.targets.tree import Mark, forked_message, is_leftover

DEAD_OWNER = 2**22 + 7  # above pid_max's default: no such process
HERE = "nohost-unit"


def test_error_lines_come_first_then_the_tail_and_the_log_is_named() -> None:
    usage = ["usage:  unbound [options]", *(f"-{c}\tan option" for c in "abcdefghij")]
    lines = ["unbound: invalid option -- 'Z'", *usage]
    text = quote_tail(lines, Path("/data/runs/r/unbound.log"))
    assert text.startswith("log lines that look like errors: unbound: invalid option -- 'Z'; ")
    assert "then last log lines: -e\tan option" in text  # the tail is the last six
    assert "usage:" not in text
    assert text.endswith("(log: /data/runs/r/unbound.log)")
    # Without error lines: the tail as before, and the path.
    assert quote_tail(["a", "b"]) == "last log lines: a | b"
    assert quote_tail([], Path("/x.log")) == "its log is empty (log: /x.log)"


def test_error_lines_are_the_first_few_that_look_like_errors() -> None:
    lines = ["starting", "error: one", "fatal: two", "ok", "cannot three", "bad four", "failed 5"]
    assert error_lines(lines) == ["error: one", "fatal: two", "cannot three", "bad four"]
    assert error_lines(["listening on 127.0.0.1#53", "terrorist"]) == []  # words, not parts


def test_a_mark_round_trips_and_says_whose_a_process_is() -> None:
    mark = Mark("run-1", "upstream", 123, 456, None)
    assert Mark.parse(mark.text()) == mark
    assert Mark.parse("not json") is None and Mark.parse("[1]") is None
    environ = b"PATH=/bin\0SOAK_PROCESS=" + mark.text().encode() + b"\0HOME=/root\0"
    assert parse_environ_value(environ, "SOAK_PROCESS") == mark.text()
    assert parse_environ_value(environ, "SOAK") is None


def test_leftover_rules(tmp_path: Path) -> None:
    fg_dead = Mark("r1", "t", DEAD_OWNER, None, None)
    assert is_leftover(fg_dead, None, ())  # a foreground run's: dies with its owner
    assert is_leftover(fg_dead, tmp_path, ("r1",))
    alive = Mark("r2", "t", os.getpid(), None, None)
    assert not is_leftover(alive, tmp_path, ())
    service_dead = Mark("r3", "t", DEAD_OWNER, None, str(tmp_path))
    assert is_leftover(service_dead, tmp_path, ())
    assert not is_leftover(service_dead, tmp_path, ("r3",))  # about to be resumed
    assert not is_leftover(service_dead, tmp_path / "other", ())  # another service's
    assert not is_leftover(service_dead, None, ())


def test_swarm_services_whose_owner_is_gone_are_selected_by_their_labels() -> None:
    here = socket.gethostname()
    labels = [
        {"soak.run": "dead", "soak.role": "load-agent", "soak.owner": f"{here}:{DEAD_OWNER}"},
        {"soak.run": "dead", "soak.role": "load-agent", "soak.owner": f"{here}:{DEAD_OWNER}"},
        {"soak.run": "dead", "soak.role": "sampler-agent", "soak.owner": f"{here}:{DEAD_OWNER}"},
        {"soak.run": "kept", "soak.role": "load-agent", "soak.owner": f"{here}:{DEAD_OWNER}"},
        {"soak.run": "live", "soak.role": "load-agent", "soak.owner": f"{here}:1"},
        {"soak.run": "far", "soak.role": "load-agent", "soak.owner": f"{HERE}:{DEAD_OWNER}"},
        {"soak.run": "norole", "soak.owner": f"{here}:{DEAD_OWNER}"},
    ]
    found = stale_agent_runs(labels, keep_runs=("kept",))
    assert found == [("dead", "load-agent"), ("dead", "sampler-agent")]
    # The rest is left and named, once per run and role; no owner label: never swept.
    labels.append({"soak.run": "bare", "soak.role": "load-agent"})
    assert ("bare", "load-agent") not in stale_agent_runs(labels, keep_runs=("kept",))
    assert left_agent_runs(labels, keep_runs=("kept",)) == [
        "left the swarm services of bare (load-agent): no owner label",
        f"left the swarm services of far (load-agent): its owner is on another host ({HERE})",
        "left the swarm services of live (load-agent): its owner lives (pid 1)",
    ]


def test_the_line_that_says_what_was_removed() -> None:
    assert Swept().line() is None
    processes = {("upstream", "r1"): [12, 13], ("named", "r0"): [9]}
    swept = Swept(processes=processes, engine_objects=2, services=["r1 (x)"])
    assert swept.line() == (
        "removed what dead runs left: 3 process(es): named of run r0 (pid 9), upstream of "
        "run r1 (pid 12, 13); 2 container(s)/volume(s); the swarm services of r1 (x)"
    )
    assert Swept(problems=["t pid 3 (run r)"]).line() == "not removed: t pid 3 (run r)"
    # What was left is named one line each, after the line of what was removed.
    left = ["left container c (run r): no owner label"]
    assert Swept(left=left).lines() == left
    assert Swept(engine_objects=1, left=left).lines()[1:] == left


def test_the_forked_message_names_the_option() -> None:
    exited = ExitInfo(0, forked=forked_message("unbound", [7]))
    assert exited.describe() == exited.forked and "(-d, or do-daemonize: no)" in exited.describe()
    assert forked_message("/usr/sbin/dnsmasq", [42]) == (
        "dnsmasq forked into the background (pid 42): run it in the foreground (--no-daemon)"
    )
    assert "(its option to stay in the foreground)" in forked_message("./mydns", [1])
