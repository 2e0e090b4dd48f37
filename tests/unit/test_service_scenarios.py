"""Every example scenario is valid, and what it names exists."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from soak.commands.validate import validate_cmd
from soak.config import is_upgrade_plan, load_scenario, read_yaml
from soak.runs.timeline import scaled_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
FILES = sorted(p for p in SCENARIOS.glob("*.yaml") if not is_upgrade_plan(read_yaml(p)))


def test_the_four_examples_are_there() -> None:
    names = {p.stem for p in FILES}
    assert {"pdns-recursor-dnsmasq", "pdns-auth", "pdns-auth-docker", "go-server-template"} <= names


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_scenario_validates(path: Path) -> None:
    result = CliRunner().invoke(validate_cmd, [str(path)])
    # The pre-flight also looks at this machine: a server not built here is its only excuse.
    machine = ("binary not found", "not found in the local engine", "no Docker engine")
    if not any(m in f"{result.output}{result.exception}" for m in machine):
        assert result.exit_code == 0, result.output
    scenario = load_scenario(path)
    # Warm-up first, excluded from verdicts; then at least one steady phase.
    assert scenario.phases[0].warmup
    assert any(not p.warmup for p in scenario.phases)
    if scenario.load is not None:
        for cls in scenario.load.mix:
            if cls.file is not None:
                assert scenario.resolve_path(cls.file).is_file(), cls.file
    # `--duration 2m` keeps every phase, in proportion.
    quick = scaled_scenario(scenario, 120)
    assert quick.duration_s == pytest.approx(120)
    assert [p.name for p in quick.phases] == [p.name for p in scenario.phases]


def test_recursor_scenario_binds_its_upstream() -> None:
    scenario = load_scenario(SCENARIOS / "pdns-recursor-dnsmasq.yaml")
    assert [s.name for s in scenario.services] == ["upstream"]
    conf = scenario.target.files[0].content or ""
    assert "{service.upstream.port.dns}" in conf
    assert "auth-zones=local.test=" in conf  # the `local` class is answered by the recursor


def test_docker_scenario_is_hardened() -> None:
    scenario = load_scenario(SCENARIOS / "pdns-auth-docker.yaml")
    target = scenario.target
    assert target.runtime == "docker"
    assert target.read_only and target.cap_drop == ["ALL"]
    assert target.volume is not None and target.volume.name is None  # fresh per run
