"""`soak token`: the teams' tokens of the service on this data directory (create, revoke,
list). Run on the service's host, as its user: the store is its data directory's."""

from __future__ import annotations

import time
from pathlib import Path

import click

from soak.commands.options import data_dir_option, data_dir_or_default
from soak.runs.layout import DataDir
from soak.service.tokens import TokenStore


def _store(data_dir: Path | None) -> TokenStore:
    return TokenStore(DataDir(data_dir_or_default(data_dir)).create().root)


@click.group("token")
def token_cmd() -> None:
    """Tokens per team: a run belongs to the team whose token submitted it."""


@token_cmd.command("create")
@click.option("--team", required=True, help="The team the token acts for.")
@click.option("--admin", is_flag=True, help="Sees, reads and stops every team's runs.")
@data_dir_option
def create_cmd(team: str, admin: bool, data_dir: Path | None) -> None:
    """Create a token and print it (once: only its hash is kept)."""
    token_id, token = _store(data_dir).create(team, admin=admin)
    kind = "an admin token" if admin else "a token"
    click.echo(f"soak: {kind} of team {team}, id {token_id}; it is not shown again", err=True)
    click.echo(token)


@token_cmd.command("revoke")
@click.argument("token_id")
@data_dir_option
def revoke_cmd(token_id: str, data_dir: Path | None) -> None:
    """Revoke a token by its id: refused (401) from its next request on."""
    _store(data_dir).revoke(token_id)
    click.echo(f"soak: token {token_id} revoked", err=True)


@token_cmd.command("list")
@data_dir_option
def list_cmd(data_dir: Path | None) -> None:
    """The tokens: id, team, admin or not, created, revoked (never the tokens)."""
    for t in _store(data_dir).list():
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t["created_ns"] / 1e9))
        revoked = t["revoked_ns"]
        state = (
            "revoked " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(revoked / 1e9))
            if revoked is not None
            else "active"
        )
        admin = "admin" if t["admin"] else "team"
        click.echo(f"{t['id']}  {t['team']:<20} {admin:<5}  created {created}  {state}")
