#!/usr/bin/env python3
"""Build the archived old data directory of the pdns-server upgrade plan.

The archive is what an operator of pdns-server 4.3.1 (gsqlite3 backend) would
carry to an upgrade: the data directory holding

  pdns.sqlite3       a database with the 4.3.1 schema: zones, records, a TSIG key
  conf.d/api.conf    the config include with the API key (pdns keeps its API key in
                     configuration, not in the database; the upgrade plan includes
                     this file, so the old key is the one the new version must accept)

The 4.3.1 schema is reconstructed from the schema files pdns-backend-sqlite3
ships: the current schema.sqlite3.sql minus what 4.3.1_to_4.7.0_schema.sqlite3.sql
adds (the `options` and `catalog` columns of `domains` and the `catalog_idx`
index). The script checks the reconstruction: the 4.3.1 database with that
migration applied must have exactly the tables, columns and indexes of a fresh
current database, or it exits 2.

The archive is deterministic (sorted entries, fixed times and owners) so that
running the script twice gives the same members.

Usage: make-pdns-4.3.1-archive.py [OUT.tar.gz] [--schema-dir DIR] [--sql-out FILE]
"""

from __future__ import annotations

import argparse
import gzip
import io
import re
import sqlite3
import sys
import tarfile
import tempfile
from pathlib import Path

SCHEMA_DIR = Path("/usr/share/pdns-backend-sqlite3/schema")
MIGRATION = "4.3.1_to_4.7.0_schema.sqlite3.sql"
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "fixtures" / "pdns-auth-4.3.1.tar.gz"

# The API key stored in the archive's config include. A test fixture's key, not a secret.
API_KEY = "soak-old-api-key-4.3.1"
TSIG_SECRET = "c29hay10c2lnLXNlY3JldC1mb3ItdGhlLXRlc3Q="  # base64 of a fixed test string
ARCHIVE_MTIME = 1_600_000_000  # fixed, so that the archive does not change between runs

ZONES: dict[str, list[tuple[str, str, str, int]]] = {
    # zone -> (name, type, content, ttl)
    "example.test": [
        (
            "example.test",
            "SOA",
            "ns1.example.test. hostmaster.example.test. 2020090101 10800 3600 604800 3600",
            3600,
        ),
        ("example.test", "NS", "ns1.example.test.", 3600),
        ("example.test", "MX", "mail.example.test.", 3600),  # prio in its own column
        ("example.test", "TXT", '"soak upgrade fixture"', 3600),
        ("ns1.example.test", "A", "192.0.2.53", 3600),
        ("www.example.test", "A", "192.0.2.10", 3600),
        ("www.example.test", "AAAA", "2001:db8::10", 3600),
        ("mail.example.test", "A", "192.0.2.11", 3600),
        ("api.example.test", "CNAME", "www.example.test.", 300),
        ("short.example.test", "A", "192.0.2.20", 60),
    ],
    "second.test": [
        (
            "second.test",
            "SOA",
            "ns1.example.test. hostmaster.example.test. 2020090101 10800 3600 604800 3600",
            3600,
        ),
        ("second.test", "NS", "ns1.example.test.", 3600),
        ("www.second.test", "A", "198.51.100.10", 3600),
        ("second.test", "TXT", '"the second zone"', 3600),
    ],
}


def sql_without_dot_commands(text: str) -> str:
    """The shipped files start with `.bail on`, a sqlite3 shell command, not SQL."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("."))


def schema_4_3_1(current_schema: str) -> str:
    """The current schema minus the `domains` columns and index the 4.7.0 migration adds."""
    out: list[str] = []
    for line in current_schema.splitlines():
        if re.match(r"^\s+(options|catalog)\s+VARCHAR", line):
            continue
        if line.startswith("CREATE INDEX catalog_idx"):
            continue
        out.append(line)
    text = "\n".join(out)
    # The column before the removed ones loses its trailing comma.
    text = re.sub(r"(account\s+VARCHAR\(40\) DEFAULT NULL),(\s*\n\);)", r"\1\2", text, count=1)
    if "options" in text.split("CREATE TABLE records")[0]:
        raise SystemExit("make-pdns-4.3.1-archive: could not remove `options` from domains")
    return text


def structure(db: sqlite3.Connection) -> dict[str, object]:
    """Tables with their columns and index names: what the migration is compared by."""
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    result: dict[str, object] = {}
    for table in sorted(t for t in tables if not t.startswith("sqlite_")):
        columns = [tuple(r[1:]) for r in db.execute(f"PRAGMA table_info({table})")]
        indexes = sorted(r[1] for r in db.execute(f"PRAGMA index_list({table})"))
        result[table] = (columns, indexes)
    return result


def verify(schema_dir: Path, old_sql: str) -> None:
    current = sql_without_dot_commands((schema_dir / "schema.sqlite3.sql").read_text())
    migration = sql_without_dot_commands((schema_dir / MIGRATION).read_text())
    fresh = sqlite3.connect(":memory:")
    fresh.executescript(current)
    migrated = sqlite3.connect(":memory:")
    migrated.executescript(old_sql)
    columns = [r[1] for r in migrated.execute("PRAGMA table_info(domains)")]
    if "options" in columns or "catalog" in columns:
        raise SystemExit("make-pdns-4.3.1-archive: the 4.3.1 schema still has 4.7 columns")
    migrated.executescript(migration)
    if structure(fresh) != structure(migrated):
        raise SystemExit(
            "make-pdns-4.3.1-archive: 4.3.1 schema + migration != current schema; "
            "the shipped schema files changed, adjust schema_4_3_1()"
        )


def fill(db: sqlite3.Connection) -> None:
    for zone, records in ZONES.items():
        cur = db.execute("INSERT INTO domains (name, type) VALUES (?, 'NATIVE')", (zone,))
        domain_id = cur.lastrowid
        for name, rtype, content, ttl in records:
            db.execute(
                "INSERT INTO records (domain_id, name, type, content, ttl, prio, disabled, auth)"
                " VALUES (?, ?, ?, ?, ?, ?, 0, 1)",
                (domain_id, name, rtype, content, ttl, 10 if rtype == "MX" else 0),
            )
    db.execute(
        "INSERT INTO tsigkeys (name, algorithm, secret) VALUES (?, ?, ?)",
        ("soak-xfr", "hmac-sha256", TSIG_SECRET),
    )
    db.commit()


def build_db(path: Path, old_sql: str) -> None:
    db = sqlite3.connect(path)
    try:
        db.executescript(old_sql)
        fill(db)
    finally:
        db.close()


def add_member(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, ARCHIVE_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    tar.addfile(info, io.BytesIO(data))


def add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, ARCHIVE_MTIME
    tar.addfile(info)


def write_archive(out: Path, db_bytes: bytes) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        add_member(tar, "pdns.sqlite3", db_bytes, 0o644)
        add_dir(tar, "conf.d")
        add_member(tar, "conf.d/api.conf", f"api-key={API_KEY}\n".encode(), 0o640)
    # mtime=0 in the gzip header: the same input gives the same bytes.
    with open(out, "wb") as fh, gzip.GzipFile(filename="", fileobj=fh, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--schema-dir", type=Path, default=SCHEMA_DIR)
    parser.add_argument("--sql-out", type=Path, help="also write the 4.3.1 schema SQL here")
    args = parser.parse_args(argv)
    try:
        current = (args.schema_dir / "schema.sqlite3.sql").read_text()
    except OSError as exc:
        print(
            f"make-pdns-4.3.1-archive: {exc} (is pdns-backend-sqlite3 installed?)", file=sys.stderr
        )
        return 2
    old_sql = schema_4_3_1(sql_without_dot_commands(current))
    verify(args.schema_dir, old_sql)
    if args.sql_out:
        args.sql_out.write_text(old_sql + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        db_path = Path(tmp) / "pdns.sqlite3"
        build_db(db_path, old_sql)
        write_archive(args.out, db_path.read_bytes())
    print(f"make-pdns-4.3.1-archive: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
