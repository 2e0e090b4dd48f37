"""scripts/make-pdns-4.3.1-archive.py: the archived old data of the pdns upgrade plan."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "make-pdns-4.3.1-archive.py"
SCHEMA_DIR = Path("/usr/share/pdns-backend-sqlite3/schema")

pytestmark = pytest.mark.skipif(
    not (SCHEMA_DIR / "4.3.1_to_4.7.0_schema.sqlite3.sql").exists(),
    reason="pdns-backend-sqlite3 schema files are not installed",
)


def make(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(out), *args], capture_output=True, text=True, check=False
    )


def test_archive_holds_a_4_3_1_database_and_the_api_key(tmp_path: Path) -> None:
    out = tmp_path / "a.tar.gz"
    assert make(out).returncode == 0
    with tarfile.open(out) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"pdns.sqlite3", "conf.d", "conf.d/api.conf"}
        assert members["conf.d/api.conf"].mode == 0o640
        tar.extractall(tmp_path / "x", filter="data")
    assert (tmp_path / "x" / "conf.d" / "api.conf").read_text().startswith("api-key=")
    with sqlite3.connect(tmp_path / "x" / "pdns.sqlite3") as db:
        columns = [r[1] for r in db.execute("PRAGMA table_info(domains)")]
        zones = sorted(r[0] for r in db.execute("SELECT name FROM domains"))
        records = db.execute("SELECT count(*) FROM records").fetchone()[0]
        tsig = db.execute("SELECT name, algorithm FROM tsigkeys").fetchall()
        indexes = [r[1] for r in db.execute("PRAGMA index_list(domains)")]
    assert "options" not in columns and "catalog" not in columns and "account" in columns
    assert "catalog_idx" not in indexes
    assert zones == ["example.test", "second.test"] and records == 14
    assert tsig == [("soak-xfr", "hmac-sha256")]


def test_the_same_archive_every_time(tmp_path: Path) -> None:
    assert make(tmp_path / "a.tar.gz").returncode == 0
    assert make(tmp_path / "b.tar.gz").returncode == 0
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()


def test_migration_that_does_not_match_the_reconstruction_is_refused(tmp_path: Path) -> None:
    """The reconstructed 4.3.1 schema is checked against the shipped migration."""
    schema_dir = tmp_path / "schema"
    shutil.copytree(SCHEMA_DIR, schema_dir)
    migration = schema_dir / "4.3.1_to_4.7.0_schema.sqlite3.sql"
    # a migration that adds one column fewer than the current schema has
    text = (
        migration.read_text()
        .replace("ALTER TABLE domains ADD catalog VARCHAR(255) DEFAULT NULL;", "")
        .replace("CREATE INDEX catalog_idx ON domains(catalog);", "")
    )
    migration.write_text(text)
    proc = make(tmp_path / "a.tar.gz", "--schema-dir", str(schema_dir))
    assert proc.returncode != 0
    assert "4.3.1 schema + migration != current schema" in proc.stderr
    assert not (tmp_path / "a.tar.gz").exists()
