"""The control API's bearer token: $SOAK_TOKEN, else a 0600 file in the data directory."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from soak.errors import InputError
from soak.runs.layout import DataDir

TOKEN_ENV = "SOAK_TOKEN"


def token_path(data_dir: Path) -> Path:
    return DataDir(data_dir).token


def server_token(data_dir: Path) -> str:
    """The token the service checks; generated into a 0600 file on first start."""
    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        return env
    path = token_path(data_dir)
    if path.exists():
        return _read(path)
    DataDir(data_dir).create()
    token = secrets.token_urlsafe(32)
    # O_EXCL and the mode at creation: the token is never readable by others, not even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def client_token(data_dir: Path) -> str:
    """The token a client sends: $SOAK_TOKEN, else the service's token file."""
    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        return env
    path = token_path(data_dir)
    if not path.exists():
        raise InputError(
            f"no token: {path} does not exist; pass the service's own --data-dir "
            f"(or set SOAK_HOME) on this host, or set {TOKEN_ENV} to the service's token"
        )
    return _read(path)


def _read(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise InputError(f"cannot read the token file {path}: {exc.strerror or exc}") from exc
    if not token:
        raise InputError(f"the token file {path} is empty")
    return token


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, else None."""
    if not header:
        return None
    scheme, _, given = header.partition(" ")
    return given.strip() if scheme.lower() == "bearer" and given.strip() else None


def token_matches(header: str | None, token: str) -> bool:
    given = bearer(header)
    return given is not None and secrets.compare_digest(given, token)
