"""`soak agent`: one load agent's segment (soak.load.fleet.agent), JSON lines on stdout."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from soak.agents.protocol import TOKEN_ENV, CoordinatorClient
from soak.commands.load import scenario_load
from soak.errors import InputError
from soak.load.fleet.agent import (
    LOAD_ENV,
    JsonLinesSink,
    load_config_json,
    open_sink,
    parse_segment,
    run_agent,
)
from soak.load.fleet.member import run_member
from soak.netsafety import check_allowed, parse_host_port


@click.command("agent")
@click.option("--segment", "segment_text", required=True, help="INDEX/COUNT, e.g. 0/3")
@click.option("--server", required=True, help="host:port of the DNS server")
@click.option("--duration", type=float, required=True, help="seconds to send")
@click.option("--scenario", type=click.Path(path_type=Path), help="take `load:` from a scenario")
@click.option("--sink", "sink_target", default="-", help="-, a file, or http://influx:8086/?db=D")
@click.option("--tag", "tag_items", multiple=True, help="KEY=VALUE on every point (soak, ...)")
@click.option("--seed", type=int, default=None, help="the run's seed (when the config has none)")
@click.option("--allow-target", "allow_targets", multiple=True, help="CIDR beyond loopback")
@click.option(
    "--coordinator",
    "coordinator_url",
    default=None,
    help=f"http://HOST:PORT of the run's coordinator (token in ${TOKEN_ENV})",
)
def agent_cmd(
    segment_text: str,
    server: str,
    duration: float,
    scenario: Path | None,
    sink_target: str,
    tag_items: tuple[str, ...],
    seed: int | None,
    allow_targets: tuple[str, ...],
    coordinator_url: str | None,
) -> None:
    """Run one agent's segment of a load config; JSON lines on stdout, totals last."""
    segment = parse_segment(segment_text, dict(os.environ))
    host, port = parse_host_port(server)
    check_allowed(host, allow_targets)
    if duration <= 0:
        raise InputError(f"--duration must be positive: {duration:g}")
    tags: dict[str, str] = {}
    for item in tag_items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--tag {item!r}: expected KEY=VALUE")
        tags[key] = value
    if scenario is not None:
        cfg, base = scenario_load(scenario)
    else:
        cfg, base = load_config_json(os.environ.get(LOAD_ENV)), Path.cwd()
    if seed is not None:
        cfg = cfg.model_copy(update={"seed": seed})
    out = JsonLinesSink(sys.stdout, "stdout")
    if coordinator_url is not None:
        token = os.environ.get(TOKEN_ENV, "")
        if not token:
            raise InputError(f"--coordinator needs the run's token in {TOKEN_ENV}")
        client = CoordinatorClient(coordinator_url, token, segment.index)
        try:
            totals = run_member(
                cfg,
                segment,
                (host, port),
                duration,
                client,
                base_dir=base,
                allow_targets=allow_targets,
            )
        finally:
            client.close()
        out.write_line({"kind": "totals", **totals.to_json_dict()})
        return
    sink = out if sink_target == "-" else open_sink(sink_target)
    try:
        totals = run_agent(
            cfg,
            segment,
            (host, port),
            duration,
            sink,
            out,
            base_dir=base,
            tags=tags,
            allow_targets=allow_targets,
        )
    finally:
        if sink is not out:
            sink.close()
    out.write_line({"kind": "totals", **totals.to_json_dict()})
