"""What the upgrade gate compares, masks and reports, with plain process versions (a
Python HTTP server serving the data directory: no DNS server needed).

`{{name}}` is filled into expected values (a `log` check that must fail does), `--set`
keeps a version string a string, only the plan's declared secrets are masked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SERVE = (
    f"exec {sys.executable} -m http.server --bind 127.0.0.1 --directory {{data_dir}} {{port.api}}"
)
MARKER = "zone-x (v1)"  # a regex would read the parentheses as a group
# The old version writes the marker into a JSON file of its data; the new one logs it.
OLD = f'echo \'{{"zone": "{MARKER}"}}\' > {{data_dir}}/v.json; {SERVE}'
NEW_LOGS_MARKER = f"echo 'fatal-marker {MARKER}' >&2; {SERVE}"


def version(script: str, label: str) -> dict[str, Any]:
    return {
        "runtime": "process",
        "name": "toy",
        "version": label,
        "argv": ["sh", "-c", script],
        "ports": {"api": {}},
        "ready": {"timeout_s": "10s", "probes": [{"kind": "http", "port": "api", "path": "/"}]},
        "stop_timeout_s": "5s",
    }


def toy_plan(new: str = SERVE, **extra: Any) -> dict[str, Any]:
    plan: dict[str, Any] = {
        "name": "toy",
        "old": version(OLD, "1"),
        "new": version(new, "2"),
        "vars": {"marker": MARKER},
        "checks": [{"name": "ready", "kind": "ready_within", "within_s": "10s"}],
    }
    plan.update(extra)
    return plan


class Run:
    def __init__(self, tmp_path: Path, plan: dict[str, Any], *args: str) -> None:
        path = tmp_path / "plan.yaml"
        path.write_text(yaml.safe_dump(plan))
        self.junit, self.json_path = tmp_path / "junit.xml", tmp_path / "result.json"
        self.work = tmp_path / "work"
        self.work.mkdir(exist_ok=True)
        self.proc = subprocess.run(
            [sys.executable, "-m", "soak.cli", "upgrade", str(path), "--junit", str(self.junit),
             "--json", str(self.json_path), "--work-dir", str(self.work), *args],
            capture_output=True, text=True, timeout=120, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        )  # fmt: skip
        self.output = self.proc.stdout + self.proc.stderr

    def cases(self) -> dict[str, ET.Element]:
        return {c.get("name", ""): c for c in ET.parse(self.junit).getroot().iter("testcase")}

    def result(self) -> dict[str, Any]:
        runs: list[dict[str, Any]] = json.loads(self.json_path.read_text())["runs"]
        return runs[0]


def test_a_var_in_a_log_pattern_that_must_not_match_fails(tmp_path: Path) -> None:
    check = {"name": "no fatal", "kind": "log", "pattern": "fatal-marker {{marker}}"}
    run = Run(tmp_path, toy_plan(NEW_LOGS_MARKER, checks=[check]))
    assert run.proc.returncode == 1, run.output
    failure = run.cases()["no fatal"].find("failure")
    assert failure is not None, run.output
    assert f"fatal-marker {MARKER}" in failure.get("message", "")
    # the same plan against a new version that does not log it passes: the check can pass
    (tmp_path / "again").mkdir()
    again = Run(tmp_path / "again", toy_plan(SERVE, checks=[check]))
    assert again.proc.returncode == 0, again.output


def test_vars_are_filled_into_every_expected_value(tmp_path: Path) -> None:
    checks = [
        {"name": "api", "kind": "api", "path": "/v.json",
         "expect": [{"path": "$.zone", "equals": "{{marker}}"}]},
        {"name": "log", "kind": "log", "pattern": "fatal-marker {{marker}}", "present": True},
        {"name": "cmd", "kind": "command", "argv": ["cat", "{data_dir}/v.json"],
         "stdout_contains": ["{{marker}}"], "stdout_matches": '"{{marker}}"'},
    ]  # fmt: skip
    run = Run(tmp_path, toy_plan(NEW_LOGS_MARKER, checks=checks))
    assert run.proc.returncode == 0, run.output
    assert {c["name"]: c["status"] for c in run.result()["checks"]} == {
        "api": "pass",
        "log": "pass",
        "cmd": "pass",
    }


def test_a_var_where_it_would_be_used_as_written_is_refused(tmp_path: Path) -> None:
    checks = [{"name": "ready {{marker}}", "kind": "ready_within", "within_s": "10s"}]
    run = Run(tmp_path, toy_plan(checks=checks))
    assert run.proc.returncode == 2, run.output
    assert "checks.0.name: {{marker}} is not filled in here" in run.proc.stderr
    assert not (tmp_path / "work").exists() or list(run.work.iterdir()) == []


def test_set_keeps_a_version_a_string(tmp_path: Path) -> None:
    run = Run(tmp_path, toy_plan(), "--set", "new.version=1.10", "--set", "vars.marker=1.26")
    assert run.proc.returncode == 0, run.output
    assert "starting toy 1.10" in run.proc.stdout  # not 1.1, not "a valid string"


def test_only_declared_secrets_are_masked(tmp_path: Path) -> None:
    dnskey = "257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0d"
    populate = [
        {"kind": "command", "argv": ["echo", dnskey], "save_stdout": "dnskey"},
        # made by the command (a literal in the plan would be shown as written)
        {
            "kind": "command",
            "argv": ["sh", "-c", "echo hunter$((20 + 2))"],
            "save_stdout": "admin_password",
        },
        {"kind": "command", "argv": ["echo", "{{dnskey}}", "{{admin_password}}"]},
    ]
    run = Run(tmp_path, toy_plan(populate=populate, secrets=["admin_password"]))
    assert run.proc.returncode == 0, run.output
    assert f"command echo {dnskey} ***" in run.proc.stdout
    for text in (run.output, run.junit.read_text(), run.json_path.read_text()):
        assert "hunter22" not in text


def test_a_failing_setup_step_is_an_error_case_with_exit_2(tmp_path: Path) -> None:
    """A pipeline tells "setup broken" (exit 2) from "upgrade broken" (exit 1)."""
    populate = [{"kind": "command", "argv": ["sh", "-c", "echo 'no such zone' >&2; exit 3"]}]
    run = Run(tmp_path, toy_plan(populate=populate))
    assert run.proc.returncode == 2, run.output
    last = run.proc.stderr.splitlines()[-1]
    assert last == "soak: setup failed on the old version: populate 1/1: exit 3: no such zone"
    error = run.cases()["populate 1/1"].find("error")
    assert error is not None and "exit 3: no such zone" in error.get("message", "")
    assert run.cases()["ready"].find("skipped") is not None
    result = run.result()
    assert (result["exit_code"], result["errors"], result["failed"]) == (2, 1, 0)


def test_each_step_is_announced_as_it_begins(tmp_path: Path) -> None:
    populate = [{"kind": "command", "argv": ["echo", "{{marker}}"]}]
    run = Run(tmp_path, toy_plan(populate=populate))
    assert run.proc.returncode == 0, run.output
    lines = [" ".join(ln.split()) for ln in run.proc.stdout.splitlines()]
    for began, ended in (
        (
            f"populate 1/1 command echo {MARKER} ...",
            f"populate 1/1 command echo {MARKER} -> exit 0",
        ),
        ("check 1/1 ready ...", "check 1/1 PASS ready"),
        ("old stopping ...", "old stopped in"),
    ):
        ends = next(i for i, ln in enumerate(lines) if ln.startswith(ended))
        assert lines[ends - 1] == began, lines
    # the record keeps each step once, as it ended
    texts = [step["text"] for step in run.result()["steps"]]
    assert not any(text.endswith("...") for text in texts), texts
