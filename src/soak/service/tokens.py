"""The teams' tokens and the owner of each run, in the data directory's tokens.db.

A token is shown once, when created; only its SHA-256 is stored (a token is 32 random
bytes, so a fast hash is enough: there is nothing to guess). The service reads the
store at every request, so a revoked token is refused at once, without a restart.
The service's own token (auth.server_token) is an admin token of team `admin`, a name
no created token may take.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soak.errors import InputError
from soak.runs.layout import DataDir

SERVICE_TEAM = "admin"
TEAM_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    id TEXT PRIMARY KEY, team TEXT NOT NULL, admin INTEGER NOT NULL,
    hash TEXT NOT NULL UNIQUE, created_ns INTEGER NOT NULL, revoked_ns INTEGER
);
CREATE TABLE IF NOT EXISTS owners (
    run_id TEXT PRIMARY KEY, team TEXT NOT NULL, token_id TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class Principal:
    """Who a request is: a team, an admin or not, by which token (`service`: the
    service's own)."""

    team: str
    admin: bool
    token_id: str

    def may_see(self, owner: str | None) -> bool:
        """A run of `owner` (None: a run no team submitted, e.g. a foreground one)."""
        return self.admin or owner == self.team


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_team(team: str) -> str:
    if not TEAM_RE.fullmatch(team):
        raise InputError(
            f"--team: {team!r} is not a team name (lowercase letters, digits, . _ -, "
            "at most 64, starting with a letter or digit)"
        )
    if team == SERVICE_TEAM:
        raise InputError(f"--team: {SERVICE_TEAM!r} is the service token's own team")
    return team


class TokenStore:
    def __init__(self, data_dir: Path) -> None:
        self.path = DataDir(data_dir).tokens_db

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        # One connection per call: the CLI writes while the service reads, in other
        # processes; a short call holds no lock between requests.
        if not self.path.exists():
            # The mode at creation: its hashes and owners are the service user's only.
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        conn = sqlite3.connect(self.path, timeout=10.0)
        try:
            conn.executescript(_SCHEMA)
            with conn:
                yield conn
        finally:
            conn.close()

    def create(self, team: str, *, admin: bool = False) -> tuple[str, str]:
        """A new token of `team`: (its id, the token itself, shown this once)."""
        check_team(team)
        token_id = secrets.token_hex(4)
        token = f"soak_{secrets.token_urlsafe(32)}"
        with self._db() as db:
            db.execute(
                "INSERT INTO tokens VALUES (?, ?, ?, ?, ?, NULL)",
                (token_id, team, int(admin), token_hash(token), time.time_ns()),
            )
        return token_id, token

    def revoke(self, token_id: str) -> None:
        with self._db() as db:
            row = db.execute("SELECT revoked_ns FROM tokens WHERE id = ?", (token_id,)).fetchone()
            if row is None:
                raise InputError(f"no token {token_id!r} (see `soak token list`)")
            if row[0] is None:
                db.execute(
                    "UPDATE tokens SET revoked_ns = ? WHERE id = ?", (time.time_ns(), token_id)
                )

    def list(self) -> list[dict[str, Any]]:
        """Every token, without its secret (nor its hash)."""
        with self._db() as db:
            rows = db.execute(
                "SELECT id, team, admin, created_ns, revoked_ns FROM tokens ORDER BY created_ns"
            ).fetchall()
        return [
            {"id": i, "team": t, "admin": bool(a), "created_ns": c, "revoked_ns": r}
            for i, t, a, c, r in rows
        ]

    def lookup(self, token: str) -> Principal | None:
        """The principal of a token that is not revoked, else None."""
        with self._db() as db:
            row = db.execute(
                "SELECT id, team, admin FROM tokens WHERE hash = ? AND revoked_ns IS NULL",
                (token_hash(token),),
            ).fetchone()
        return Principal(team=row[1], admin=bool(row[2]), token_id=row[0]) if row else None

    def set_owner(self, run_id: str, principal: Principal) -> None:
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO owners VALUES (?, ?, ?)",
                (run_id, principal.team, principal.token_id),
            )

    def owners(self) -> dict[str, str]:
        """run id -> owning team."""
        with self._db() as db:
            return dict(db.execute("SELECT run_id, team FROM owners").fetchall())

    def owner(self, run_id: str) -> str | None:
        with self._db() as db:
            row = db.execute("SELECT team FROM owners WHERE run_id = ?", (run_id,)).fetchone()
        return row[0] if row else None
