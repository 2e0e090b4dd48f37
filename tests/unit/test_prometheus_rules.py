"""grafana/prometheus/soak-rules.yml: promtool accepts it, its unit tests pass (each
alert once firing, once not), and it only names metrics the service exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from soak.sinks.metrics import ServiceMetrics

PROM = Path(__file__).resolve().parents[2] / "grafana" / "prometheus"
RULES = PROM / "soak-rules.yml"
RULE_TESTS = PROM / "soak-rules.test.yml"

promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], cwd=PROM, capture_output=True, text=True, timeout=60)


@promtool
def test_promtool_check_rules() -> None:
    r = _run("check", "rules", RULES.name)
    assert r.returncode == 0, r.stdout + r.stderr


@promtool
def test_promtool_test_rules() -> None:
    r = _run("test", "rules", RULE_TESTS.name)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout + r.stderr


@promtool
def test_promtool_test_rules_fails_when_an_alert_is_expected_wrongly(tmp_path: Path) -> None:
    """The rule tests can fail: flip one expectation and promtool must say so."""
    data = yaml.safe_load(RULE_TESTS.read_text())
    data["rule_files"] = [str(RULES)]
    first = data["tests"][0]["alert_rule_test"][0]
    assert first["exp_alerts"] == []
    first["eval_time"] = "10m"  # growing for 10 minutes: it fires, not []
    bad = tmp_path / "bad.test.yml"
    bad.write_text(yaml.safe_dump(data))
    r = subprocess.run(
        ["promtool", "test", "rules", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode != 0


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    alerts = [
        r["alert"] for grp in yaml.safe_load(RULES.read_text())["groups"] for r in grp["rules"]
    ]
    cases: dict[str, list[bool]] = {}
    for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            cases.setdefault(case["alertname"], []).append(bool(case["exp_alerts"]))
    for alert in alerts:
        assert True in cases.get(alert, []), f"{alert}: no firing case"
        assert False in cases.get(alert, []), f"{alert}: no quiet case"


def _exported_names() -> set[str]:
    registry = CollectorRegistry()
    ServiceMetrics(registry)
    names = set()
    for family in registry.collect():
        for sample in family.samples:
            names.add(sample.name)
        names.add(family.name)
        if family.type == "counter":
            names.add(family.name + "_total")
    return names


def test_rules_name_only_exported_metrics() -> None:
    exported = _exported_names()
    text = RULES.read_text()
    used = set(re.findall(r"\b(soak_[a-z0-9_]+)", text))
    assert used
    assert used - exported == set()
