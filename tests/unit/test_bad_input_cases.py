"""Bad input outside the table of docs/bad-input.md's rows (tests/unit/test_bad_input.py):
the base scenario those rows break passes, a missing image, the rate's edges, secrets,
tcpdump, validate's warnings and `--json -`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from soak.cli import main
from soak.config import load_scenario
from soak.errors import InputError
from soak.preflight import check_scenario
from tests.unit.test_bad_input import base_scenario, write_base


def test_the_base_scenario_passes_the_checks(tmp_path: Path) -> None:
    """The rows fail for their own reason: without it, the same scenario is good."""
    sc = base_scenario()
    write_base(tmp_path, sc)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sc))
    check_scenario(load_scenario(tmp_path / "s.yaml"))
    assert shutil.which("sleep")  # the base scenario's processes exist: not why rows fail


@pytest.mark.parametrize("path", ["validate", "foreground"])
def test_a_missing_image_is_refused_before_anything_starts(
    path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The docker row: the image is looked up in the local engine (needs one)."""
    from soak.docker_client import engine
    from soak.errors import TargetStartError

    try:
        engine().close()
    except TargetStartError:
        pytest.skip("no Docker engine here")
    sc = {
        "name": "no-image",
        "target": {"runtime": "docker", "image": "soak-test/no-such-image:none"},
        "phases": [{"name": "a", "duration_s": "10s"}],
    }
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sc))
    data = tmp_path / "data"
    argv = (
        ["validate"] if path == "validate" else ["start", "--foreground", "--data-dir", str(data)]
    )
    with pytest.raises(SystemExit) as exited:
        main([*argv, str(tmp_path / "s.yaml")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2
    assert err == [
        "soak: target: image soak-test/no-such-image:none not found in the local engine "
        "(build or load it first; soak does not pull)"
    ]
    assert not data.exists() or not (data / "runs").exists()


def test_rate_max_is_flat_out_and_survives_the_trip_to_the_service(tmp_path: Path) -> None:
    """`rate_qps: max` is the spelling of flat out; the JSON the client posts and the run
    record say `max`, and the service takes it back."""
    from soak.service.api import parse_scenario

    sc = base_scenario()
    sc["load"]["rate_qps"] = "max"
    sc["phases"][0]["rate_qps"] = "max"
    write_base(tmp_path, sc)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sc))
    scenario = load_scenario(tmp_path / "s.yaml")
    assert scenario.load is not None and scenario.load.rate_qps == 0.0
    assert scenario.phases[0].rate_qps == 0.0
    body = scenario.model_dump_json().encode()
    assert b'"rate_qps":"max"' in body
    again = parse_scenario(body, str(tmp_path), None)
    assert again.load is not None and again.load.rate_qps == 0.0
    check_scenario(again)


def test_soak_load_rate_zero_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["load", "--server", "127.0.0.1:53", "--queries", "q.txt", "--rate", "0"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "soak: --rate: 0 q/s sends nothing; for as fast as the server answers use --rate max"
    )


def test_a_client_leaves_the_secrets_to_the_service(tmp_path: Path) -> None:
    """`soak start --server`: `{env.NAME}` is the service's environment, not the client's."""
    sc = base_scenario()
    write_base(tmp_path, sc)
    sc["target"]["env"] = {"T": "{env.SOAK_TEST_NEVER_SET}"}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sc))
    scenario = load_scenario(tmp_path / "s.yaml")
    check_scenario(scenario, secrets=False)
    with pytest.raises(InputError, match="SOAK_TEST_NEVER_SET is not set"):
        check_scenario(scenario)


def test_a_pcap_capture_without_tcpdump_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from soak.errors import InputError
    from soak.preflight import check_capture
    from soak.traffic.capture_config import CaptureConfig

    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH where no tcpdump is
    with pytest.raises(InputError, match="tcpdump is not installed"):
        check_capture(CaptureConfig(source="pcap"), tmp_path)


def test_validate_warns_on_a_literal_secret_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token written in the scenario is kept in clear wherever the scenario is: a
    warning with the reference to write instead; the scenario is still valid (exit 0).
    A DNS name with `key` in it is not a secret's."""
    monkeypatch.chdir(tmp_path)
    sc = base_scenario()
    write_base(tmp_path, sc)
    sc["target"]["env"] = {"API_TOKEN": "s3cr3t", "DNSKEY": "257 3 13 abc", "KEY_ID": "1"}
    sc["target"]["argv"] = ["sleep", "600", "--db-password=hunter2"]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sc))
    with pytest.raises(SystemExit) as exited:
        main(["validate", "s.yaml"])
    out, err = capsys.readouterr()
    assert exited.value.code == 0, err
    assert "is valid" in out
    # (besides the leak criteria's warning: the base scenario's phases are short)
    assert [line for line in err.splitlines() if "secret's name" in line] == [
        "soak: warning: target.argv.2: a literal value under a secret's name is kept"
        " in clear; give it by reference: '{env.DB_PASSWORD}' (or {file:PATH})",
        "soak: warning: target.env.API_TOKEN: a literal value under a secret's name is kept"
        " in clear; give it by reference: '{env.API_TOKEN}' (or {file:PATH})",
    ]


def test_json_dash_is_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`soak upgrade PLAN --json -`: the JSON on stdout (one document), no file named `-`;
    here a plan that cannot run (exit 2), whose report is written all the same."""
    import json

    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.yaml").write_text("name: p\nold: {runtime: process}\nnew: {}\n")
    with pytest.raises(SystemExit) as exited:
        main(["upgrade", "plan.yaml", "--json", "-"])
    out, err = capsys.readouterr()
    assert exited.value.code == 2, err
    assert not (tmp_path / "-").exists()
    report = json.loads(out)
    assert report["exit_code"] == 2 and report["errors"] == 1, report
    assert err.startswith("soak: plan.yaml: old.process.argv: Field required"), err
