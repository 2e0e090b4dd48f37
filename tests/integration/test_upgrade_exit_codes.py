"""Exit codes of `soak upgrade` with plain process versions (no DNS server needed).

The new version failing on the old data is the upgrade failing: exit 1, the JUnit case
`new version starts` failed with the version's log lines. A plan that cannot run is
exit 2: the old version failing on the plan's own data, a binary that is not there.
A version stopped by soak is reported "stopped", not "killed by signal 15".
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SERVE = f"exec {sys.executable} -m http.server --bind 127.0.0.1 {{port.api}}"
# The old version leaves a marker in its data; this "new" one refuses such data.
OLD = f"echo format-1 > {{data_dir}}/marker; {SERVE}"
NEW_REFUSES = (
    'if test -e {data_dir}/marker; then echo "fatal: unknown data format $(cat {data_dir}/marker)"'
    f" >&2; exit 1; fi; {SERVE}"
)


def src_env() -> dict[str, str]:
    """The environment with this checkout's soak first, whatever is installed."""
    return {**os.environ, "PYTHONPATH": str(REPO / "src")}


def upgrade_argv(path: Path, junit: Path, work: Path, report: Path | None = None) -> list[str]:
    """`soak upgrade PLAN --junit J [--json R] --work-dir W`."""
    json_out = ["--json", str(report)] if report is not None else []
    argv = ["upgrade", str(path), "--junit", str(junit), *json_out, "--work-dir", str(work)]
    return [sys.executable, "-m", "soak.cli", *argv]


def version(script: str, label: str, argv: list[str] | None = None) -> dict[str, object]:
    return {
        "runtime": "process",
        "name": "toy",
        "version": label,
        "argv": argv or ["sh", "-c", script],
        "ports": {"api": {}},
        "ready": {
            "timeout_s": "10s",
            "probes": [{"kind": "http", "port": "api", "path": "/"}],
        },
        "stop_timeout_s": "5s",
    }


def upgrade(
    tmp_path: Path,
    old: str,
    new: str,
    new_argv: list[str] | None = None,
    plan_vars: dict[str, str] | None = None,
    old_port: int | None = None,
    populate: list[dict[str, object]] | None = None,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    plan = {
        "name": "toy",
        "old": version(old, "1"),
        "new": version(new, "2", new_argv),
        "checks": [{"name": "ready", "kind": "ready_within", "within_s": "10s"}],
        "vars": plan_vars or {},
        "populate": populate or [],
    }
    if old_port is not None:  # a fixed host port for the old version
        plan["old"]["ports"] = {"api": {"host": old_port}}  # type: ignore[index]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    junit = tmp_path / "junit.xml"
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(
        upgrade_argv(path, junit, work),
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env=src_env(),
    )  # fmt: skip
    assert kept_logs(work) == []  # nothing left behind but a failed run's logs
    return proc, junit


def kept_logs(work: Path) -> list[Path]:
    """What a run left in the work directory, a failed run's kept logs aside; those
    (their files) are asserted where a test expects them."""
    return [p for p in work.iterdir() if not p.name.startswith("soak-upgrade-logs-")]


def logs_of(work: Path) -> dict[str, str]:
    """The kept logs of the one failed run in `work`: file (under its directory) -> text."""
    (logs,) = work.glob("soak-upgrade-logs-*")
    return {str(p.relative_to(logs)): p.read_text() for p in logs.rglob("*") if p.is_file()}


def cases(junit: Path) -> dict[str, ET.Element]:
    return {c.get("name", ""): c for c in ET.parse(junit).getroot().iter("testcase")}


def test_a_plan_whose_versions_work_passes_and_says_stopped(tmp_path: Path) -> None:
    proc, _ = upgrade(tmp_path, OLD, SERVE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stops = [ln.split(None, 1)[1] for ln in proc.stdout.splitlines() if " stopped" in ln]
    assert [re.sub(r" in \d+\.\d\d s$", "", s) for s in stops] == ["stopped", "stopped"], stops
    assert "signal" not in proc.stdout


def test_the_new_version_failing_on_the_old_data_is_a_failed_check(tmp_path: Path) -> None:
    proc, junit = upgrade(tmp_path, OLD, NEW_REFUSES)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failure = cases(junit)["new version starts"].find("failure")
    assert failure is not None and failure.text is not None
    assert "exited with code 1 before it was ready" in failure.text
    assert "\nfatal: unknown data format format-1" in failure.text  # its log, one line a line
    assert cases(junit)["ready"].find("skipped") is not None
    assert "fatal: unknown data format format-1" in proc.stdout
    # the failed run's logs stay without --keep: the new version's, where the docs say
    logs = logs_of(tmp_path / "work")
    assert "fatal: unknown data format format-1" in logs["new/toy.log"], logs
    assert "kept the failed run's logs in " in proc.stdout


def test_the_old_version_failing_on_its_own_data_is_a_plan_that_cannot_run(
    tmp_path: Path,
) -> None:
    proc, junit = upgrade(tmp_path, "echo cannot open data >&2; exit 1", SERVE)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "old version (toy 1) cannot start" in proc.stderr
    assert "cannot open data" in proc.stderr
    # the report CI reads: the reason as an error case (its log in the body), the check skipped
    error = cases(junit)["old version starts"].find("error")
    assert error is not None and "old version (toy 1) cannot start" in error.get("message", "")
    assert "\ncannot open data" in (error.text or "")
    assert cases(junit)["ready"].find("skipped") is not None


def test_a_taken_port_is_a_plan_that_cannot_run_with_a_report(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc, junit = upgrade(tmp_path, OLD, SERVE, old_port=port)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(port) in proc.stderr and proc.stdout == ""
    error = cases(junit)["plan can run"].find("error")
    assert error is not None and str(port) in error.get("message", "")
    assert cases(junit)["ready"].find("skipped") is not None


def test_populate_lines_show_the_values_filled_in(tmp_path: Path) -> None:
    plan_vars = {"greeting": "hello-from-vars"}
    populate = [{"kind": "command", "argv": ["echo", "{{greeting}}", "{port.api}"]}]
    proc, _ = upgrade(tmp_path, OLD, SERVE, None, plan_vars, populate=populate)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("populate "))
    assert "command echo hello-from-vars " in line and "{{" not in line and "{port" not in line


def test_a_new_binary_that_is_not_there_is_a_plan_that_cannot_run(tmp_path: Path) -> None:
    assert shutil.which("no-such-dns-server") is None
    proc, junit = upgrade(tmp_path, OLD, "", new_argv=["no-such-dns-server"])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    # The pre-flight names it before anything starts: one line, no version was run.
    assert proc.stderr == "soak: toy: binary not found on PATH: no-such-dns-server\n"
    # CI still gets a report: the reason as an error case, the planned check skipped.
    assert_cannot_run_report(junit, "toy: binary not found on PATH: no-such-dns-server")


def test_the_pre_flight_checks_a_binary_named_by_a_var_as_the_runner_would_run_it(
    tmp_path: Path,
) -> None:
    # `{{name}}` from the plan's vars (as a matrix entry gives an image) is filled in
    # before the check: the line names the real binary, not the placeholder.
    args = (tmp_path, OLD, "", ["{{server}}"], {"server": "no-such-dns-server"})
    proc, junit = upgrade(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == "soak: toy: binary not found on PATH: no-such-dns-server\n"
    assert_cannot_run_report(junit, "toy: binary not found on PATH: no-such-dns-server")


def assert_cannot_run_report(junit: Path, reason: str) -> None:
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("errors"), suite.get("skipped")) == ("2", "1", "1")
    error = cases(junit)["plan can run"].find("error")
    assert error is not None and error.get("message") == reason
    assert cases(junit)["ready"].find("skipped") is not None


def populate_sleeps(tmp_path: Path, sleep_s: int) -> Path:
    """plan.yaml: a toy pair whose populate step sleeps `sleep_s` (time to interrupt it)."""
    plan = {
        "name": "toy",
        "old": version(OLD, "1"),
        "new": version(SERVE, "2"),
        "populate": [{"kind": "command", "argv": ["sleep", str(sleep_s)]}],
        "checks": [{"name": "ready", "kind": "ready_within", "within_s": "10s"}],
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def test_sigterm_during_populate_stops_the_server_and_reports(tmp_path: Path) -> None:
    """What a CI cancel sends: exit 143, the server process gone, the run directory
    removed, the JUnit with the interruption as an error case and the check skipped."""
    path = populate_sleeps(tmp_path, 30)
    junit, work = tmp_path / "junit.xml", tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen(
        upgrade_argv(path, junit, work),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env=src_env(),
    )  # fmt: skip
    assert proc.stdout is not None
    server_pid = 0
    for line in proc.stdout:
        if m := re.match(r"old +ready in .* \(pid (\d+);", line):
            server_pid = int(m.group(1))
            break
    assert server_pid
    # the step is announced as it begins: a step that hangs shows what it is doing
    begun = next(line for line in proc.stdout if line.startswith("populate"))
    assert begun == "populate  1/1 command sleep 30 ...\n"
    sleeper = wait_for_child(proc.pid, "sleep")
    wait_blocked(proc.pid)  # soak reading the step's output, not still launching it
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, out + err
    assert not pid_alive(server_pid) and not pid_alive(sleeper)
    assert list(work.iterdir()) == []
    error = cases(junit)["interrupted"].find("error")
    assert error is not None and error.get("message", "").startswith(
        "SIGTERM during populate: `populate 1/1 command sleep 30` was under way;"
    )
    assert "populate 1/1 command sleep 30" in err  # the interruption's line names the step
    assert cases(junit)["ready"].find("skipped") is not None


def wait_for_child(parent: int, name: str, timeout_s: float = 30.0) -> int:
    """The pid of `parent`'s child process called `name`, once it runs."""
    deadline_s = time.monotonic() + timeout_s
    while time.monotonic() < deadline_s:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                comm = stat.read_text().split("(", 1)[1].rsplit(")", 1)[0]
                if int(fields[1]) == parent and comm == name:
                    return int(stat.parent.name)
        time.sleep(0.05)
    raise AssertionError(f"no child {name} of {parent}")


def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline_s = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline_s, "the state never came"
        time.sleep(0.05)


def wait_blocked(pid: int, timeout_s: float = 30.0) -> None:
    """Until the process's main thread sleeps in poll() (waiting on a child's output)."""
    deadline_s = time.monotonic() + timeout_s
    while "poll" not in Path(f"/proc/{pid}/wchan").read_text():
        assert time.monotonic() < deadline_s, "soak never waited on the step"
        time.sleep(0.02)


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_failed_migration_quotes_stderr_and_every_planned_case_is_reported(
    tmp_path: Path,
) -> None:
    """stdout's progress line is the last line printed, stderr's reason is quoted; the
    output lines are in the case (the run directory goes without --keep); the
    rollback's checks are reported skipped, not dropped."""
    script = "echo converting; echo 'boom: schema v9 unknown' >&2; echo converting more; exit 3"
    plan = {
        "name": "toy",
        "old": version(OLD, "1"),
        "new": version(SERVE, "2"),
        "migrate": {"command": ["sh", "-c", script]},
        "checks": [{"name": "ready", "kind": "ready_within", "within_s": "10s"}],
        "rollback": {"checks": [{"name": "back", "kind": "ready_within", "within_s": "10s"}]},
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    junit, report, work = tmp_path / "junit.xml", tmp_path / "r.json", tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(
        upgrade_argv(path, junit, work, report),
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env=src_env(),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert kept_logs(work) == []
    assert "boom: schema v9 unknown" in logs_of(work)["migrate.log"]
    assert json.loads(report.read_text())["runs"][0]["logs_dir"].startswith(str(work))
    failure = cases(junit)["migrate"].find("failure")
    assert failure is not None
    assert failure.get("message", "").endswith("sh exited with 3: boom: schema v9 unknown")
    body = failure.text or ""
    assert "stderr: boom: schema v9 unknown" in body and "stdout: converting more" in body
    assert {n: c.find("skipped") is not None for n, c in cases(junit).items()} == {
        "migrate": False,
        "ready": True,
        "rollback: back": True,
    }
    run = json.loads(report.read_text())["runs"][0]
    assert "stderr: boom: schema v9 unknown" in run["checks"][0]["output"]


def test_sigterm_in_the_first_pair_of_a_matrix_reports_the_second_as_not_run(
    tmp_path: Path,
) -> None:
    plan = {
        "name": "toy",
        "matrix": {"old": {"a": {"old.version": "1a"}, "b": {"old.version": "1b"}}},
        "old": version(OLD, "1"),
        "new": version(SERVE, "2"),
        "populate": [{"kind": "command", "argv": ["sleep", "30"]}],
        "checks": [{"name": "ready", "kind": "ready_within", "within_s": "10s"}],
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    junit, report, work = tmp_path / "junit.xml", tmp_path / "r.json", tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen(
        upgrade_argv(path, junit, work, report),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env=src_env(),
    )  # fmt: skip
    wait_for_child(proc.pid, "sleep")
    wait_blocked(proc.pid)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, out + err
    assert "matrix: 2 pairs, exit 143: toy[old a]: interrupted (SIGTERM)" in out
    suites = {s.get("name"): s for s in ET.parse(junit).getroot().iter("testsuite")}
    assert (suites["toy[old a]"].get("errors"), suites["toy[old a]"].get("skipped")) == ("1", "1")
    second = suites["toy[old b]"].find("testcase/skipped")
    assert second is not None and second.get("message") == "not run: interrupted by SIGTERM"
    data = json.loads(report.read_text())
    assert (data["matrix"], data["interrupted"], len(data["runs"])) == (True, "SIGTERM", 2)
    assert list(work.iterdir()) == []


def test_a_killed_process_plan_is_cleaned_up_by_the_next_run(tmp_path: Path) -> None:
    """SIGKILL: the old server dies with soak (soak.targets), the populate command is
    left running in the run directory; the next run kills it (it works in that
    directory) and removes the directory."""
    path = populate_sleeps(tmp_path, 60)
    work = tmp_path / "work"
    work.mkdir()
    argv = [sys.executable, "-m", "soak.cli", "upgrade", str(path), "--work-dir", str(work)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=REPO, env=env)
    assert proc.stdout is not None
    server_pid = next(
        int(m.group(1))
        for line in proc.stdout
        if (m := re.match(r"old +ready in .* \(pid (\d+);", line))
    )
    sleeper = wait_for_child(proc.pid, "sleep")
    proc.kill()
    proc.wait(timeout=30)
    assert pid_alive(sleeper)  # what a killed run leaves
    wait_until(lambda: not pid_alive(server_pid))  # the version died with soak
    plan = yaml.safe_load(path.read_text())
    plan["populate"] = []
    path.write_text(yaml.safe_dump(plan))
    again = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "run director(ies) or process(es) of killed runs" in again.stdout
    assert not pid_alive(sleeper)
    assert list(work.iterdir()) == []
