"""`soak capture`: a server's client queries into a soak capture file that
`soak load --replay` (or a scenario's `load.replay`) plays back (docs/replay.md).

From a dnstap socket the running server writes to (unbound: `dnstap-socket-path`
with `dnstap-log-client-query-messages: yes`; BIND: `dnstap { auth query; client
query; };` with `dnstap-output unix`: an authoritative BIND logs its clients' queries
as AUTH_QUERY), for a duration; or from a pcap, pcapng or dnstap file
the user brings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from soak.errors import InputError
from soak.traffic.capture_file import Builder, summary, write_capture
from soak.traffic.dnstap import Listener
from soak.traffic.sources import finish, load_capture
from soak.units import parse_duration_s


@click.command("capture")
@click.option(
    "--dnstap-socket",
    type=click.Path(path_type=Path),
    help="listen here (Frame Streams) for the server's dnstap",
)
@click.option("--duration", type=str, default=None, help="how long to listen (30s, 10m)")
@click.option(
    "--from",
    "source",
    type=click.Path(path_type=Path),
    help="convert a pcap, pcapng or dnstap file instead",
)
@click.option("--clients-by-port", is_flag=True, help="a client is an address and a port")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
def capture_cmd(
    dnstap_socket: Path | None,
    duration: str | None,
    source: Path | None,
    clients_by_port: bool,
    output: Path,
    as_json: bool,
) -> None:
    """Record a server's client queries (dnstap) or convert a capture, for replay."""
    if (dnstap_socket is None) == (source is None):
        raise InputError("give --dnstap-socket PATH --duration D, or --from FILE")
    if source is not None:
        capture = load_capture(source, clients_by_port)
    else:
        assert dnstap_socket is not None
        if duration is None:
            raise InputError("--dnstap-socket needs --duration (e.g. 10m)")
        duration_s = duration_flag(duration)
        builder = Builder(f"dnstap:{dnstap_socket}", clients_by_port)
        listener = Listener(dnstap_socket)
        try:
            listener.record(duration_s, builder)
        finally:
            listener.close()
        capture = finish(builder, f"dnstap socket {dnstap_socket}")
    write_capture(output, capture)
    info = {"output": str(output), **summary(capture)}
    click.echo(json.dumps(info) if as_json else _text(info))


def _text(info: dict[str, Any]) -> str:
    """The summary for a reader: what was written, then the counts by type and transport."""

    def counts(by: dict[str, int]) -> str:
        return ", ".join(f"{name} {n:,}" for name, n in by.items()) or "none"

    return "\n".join(
        [
            f"{info['output']}: {info['queries']:,} queries from {info['clients']:,}"
            f" client(s) over {info['duration_s']:g} s",
            f"  by type: {counts(info['qtypes'])}",
            f"  by transport: {counts(info['transports'])}",
        ]
    )


def duration_flag(text: str) -> float:
    """--duration: a positive duration (30, 30s, 10m), else one line of bad input."""
    try:
        duration_s = parse_duration_s(text)
    except ValueError as exc:
        raise InputError(f"--duration: {exc}") from None
    if duration_s <= 0:
        raise InputError("--duration must be positive (e.g. 30 or 30s)")
    return duration_s
