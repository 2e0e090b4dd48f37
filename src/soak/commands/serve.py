"""`soak serve`: the service, its scheduler and HTTP control API."""

from __future__ import annotations

import ipaddress
import os
import ssl
from pathlib import Path

import click

from soak.commands.options import data_dir_option, data_dir_or_default
from soak.errors import InputError

TRUSTED_LINE = (
    "soak: for trusted users only: a scenario runs its argv and commands as this "
    "service's user (uid {uid}), and any valid token submits scenarios"
)


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or a name, looked up once) is this machine's loopback."""
    from soak.netsafety import resolve_ip

    try:
        return ipaddress.ip_address(resolve_ip(host)).is_loopback
    except ValueError:
        return False


def check_transport(
    host: str, tls: tuple[Path, Path] | None, insecure: bool
) -> tuple[str, str | None]:
    """The URL scheme and a warning line (or None) for listening on `host`; InputError
    for plain HTTP beyond loopback without --insecure, before anything starts."""
    if tls is not None:
        try:  # a bad pair is one line now, not a traceback from uvicorn later
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(*tls)
        except (OSError, ssl.SSLError) as exc:
            raise InputError(f"--tls-cert/--tls-key: cannot load them: {exc}") from exc
        return "https", None
    if is_loopback(host):
        return "http", None
    if not insecure:
        raise InputError(
            f"--listen {host}: beyond loopback the tokens would cross the network in "
            "plain HTTP; give --tls-cert and --tls-key, or --insecure to accept that"
        )
    return "http", (
        f"soak: warning: --insecure: plain HTTP on {host}, beyond loopback: tokens, "
        "scenarios and reports cross the network in clear text"
    )


@click.command("serve")
@click.option("--listen", default="127.0.0.1:8089", show_default=True, help="host:port")
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    help="PEM certificate (chain): serve HTTPS (with --tls-key).",
)
@click.option("--tls-key", type=click.Path(dir_okay=False, path_type=Path), help="PEM key.")
@click.option(
    "--insecure", is_flag=True, help="Plain HTTP on an address beyond loopback (a warning)."
)
@data_dir_option
def serve_cmd(
    listen: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    insecure: bool,
    data_dir: Path | None,
) -> None:
    """Run the service: scheduler and HTTP control API; resumes running soaks."""
    import uvicorn

    from soak.netsafety import parse_host_port
    from soak.service.api import create_app
    from soak.service.auth import server_token
    from soak.service.manager import RunManager

    host, port = parse_host_port(listen, default_port=8089)
    if (tls_cert is None) != (tls_key is None):
        raise InputError("--tls-cert and --tls-key go together")
    tls = (tls_cert, tls_key) if tls_cert is not None and tls_key is not None else None
    scheme, warning = check_transport(host, tls, insecure)
    ddir = data_dir_or_default(data_dir)
    manager = RunManager(ddir)
    token = server_token(ddir)
    resumed = manager.start()
    click.echo(TRUSTED_LINE.format(uid=os.geteuid()), err=True)
    if warning:
        click.echo(warning, err=True)
    click.echo(f"soak: serving on {scheme}://{host}:{port} (data {ddir})", err=True)
    for line in manager.leftovers:
        click.echo(f"soak: {line}", err=True)
    for run_id in resumed:
        click.echo(f"soak: resumed {run_id}", err=True)
    config = uvicorn.Config(
        create_app(manager, token),
        host=host,
        port=port,
        log_level="warning",
        lifespan="off",
        ssl_certfile=str(tls[0]) if tls else None,
        ssl_keyfile=str(tls[1]) if tls else None,
    )
    server = uvicorn.Server(config)
    try:
        server.run()
    finally:
        manager.shutdown(stop_runs=False)
    if not server.started:
        raise InputError(f"could not listen on {host}:{port}")
