"""Readiness means "answers": a new version that serves another answer than the
readiness probe asks for has started; what it answers is a failed case, and the checks
run (before, the run waited for the probe's timeout and read "new version cannot start").
Real unbound processes, old and new with the same probe (as `<<: *old` gives them).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.servers import UNBOUND_FOREGROUND, unbound_process_target
from tests.support.upgrades import run_plan

pytestmark = pytest.mark.integration

if shutil.which("unbound") is None:
    pytest.skip("unbound is not installed on this host", allow_module_level=True)

CONF = (
    "server:\n"
    + UNBOUND_FOREGROUND
    + """    interface: 127.0.0.1@{{port.dns}}
    port: {{port.dns}}
    do-ip6: no
    local-zone: "." refuse
    local-zone: "example.test." static
    local-data: "www.example.test. 3600 IN A {www}"
remote-control:
    control-enable: no
"""
)


def server(www: str, label: str) -> dict[str, object]:
    return {
        **unbound_process_target(conf=CONF.format(www=www)),
        "version": label,
        # the probe's answer is tried until this timeout (from the start) has passed
        "ready": {
            "timeout_s": 8,
            "probes": [{"kind": "dns", "name": "www.example.test", "answer": "192.0.2.10"}],
        },
    }


def test_a_new_version_with_another_answer_started_and_its_checks_ran(
    tmp_path: Path, work: Path
) -> None:
    plan = {
        "name": "changed-answer",
        "old": server("192.0.2.10", "old"),
        "new": server("192.0.2.99", "new"),
        "snapshot": [{"kind": "dig", "name": "www", "qname": "www.example.test"}],
        "checks": [
            {"name": "www unchanged", "kind": "unchanged", "snapshot": "www"},
            {"name": "ready within 5 s", "kind": "ready_within", "within_s": 5},
        ],
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    result, lines = run_plan(path, [], work)
    by_name = {c.name: c for c in result.checks}
    assert "new version starts" not in by_name, lines
    assert result.exit_code == 1 and result.start_error is None
    # it was ready when it answered, not when the probe's answer came (it never did)
    assert by_name["ready within 5 s"].status == "pass"
    assert by_name["www unchanged"].status == "fail"
    assert "192.0.2.99" in by_name["www unchanged"].got
    probe = by_name[
        "answers as its ready probe expects: dns www.example.test/A on port dns"
        " -> NOERROR with 192.0.2.10"
    ]
    assert probe.status == "fail" and "192.0.2.99" in probe.got
    assert [c.name for c in result.checks][-1] == probe.name  # after the plan's checks
