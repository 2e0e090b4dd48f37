"""Bad input of an upgrade (docs/bad-input.md): its data archive and its plan's
pre-flight are read before anything starts; one line on stderr, exit 2.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest
import yaml

from soak.cli import main
from soak.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("row", "archive_bytes", "line"),
    [
        ("archive-not-tar", b"not an archive at all\n" * 40, "is not a readable tar archive"),
        ("archive-truncated", None, "is not a readable tar archive"),
    ],
)
def test_upgrade_archive_is_read_before_anything_starts(
    row: str, archive_bytes: bytes | None, line: str, tmp_path: Path
) -> None:
    from soak.upgrade.config import load_plan

    plan = ROOT / "scenarios" / "pdns-auth-upgrade.yaml"
    archive = tmp_path / "data.tar.gz"
    if archive_bytes is None:  # a real archive cut short
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "big").write_bytes(os.urandom(200_000))
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(tmp_path / "d", arcname="d")
        archive.write_bytes(archive.read_bytes()[:50_000])
    else:
        archive.write_bytes(archive_bytes)
    env = {"PDNS_API_KEY": "k", **os.environ}
    with pytest.raises(InputError) as raised:
        load_plan(plan, [f"data.archive={archive}"], env)
    assert line in str(raised.value)
    assert f"data.archive: {archive}" in str(raised.value)


def test_a_good_archive_passes(tmp_path: Path) -> None:
    from soak.upgrade.config.loading import _archive_problems

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("x")
    archive = tmp_path / "ok.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(tmp_path / "d", arcname="d")
    assert _archive_problems(archive) == []


@pytest.mark.parametrize("path", ["validate", "upgrade"])
def test_an_upgrade_plan_gets_the_same_preflight(
    path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`soak validate PLAN` and `soak upgrade PLAN`: a new version's binary that is not
    there is one line and exit 2 before the old version starts."""
    target = {"runtime": "process", "name": "srv", "argv": ["sleep", "600"], "ports": {"dns": {}}}
    plan = {
        "name": "p",
        "old": target,
        "new": {**target, "argv": ["no-such-dns-server"]},
        "checks": [{"name": "ready", "kind": "ready_within", "within_s": "10s"}],
    }
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    work = tmp_path / "work"
    argv = ["validate"] if path == "validate" else ["upgrade", "--work-dir", str(work)]
    with pytest.raises(SystemExit) as exited:
        main([*argv, str(tmp_path / "plan.yaml")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2, err
    assert err == ["soak: srv: binary not found on PATH: no-such-dns-server"], err
    assert not work.exists()  # no run directory, nothing started
