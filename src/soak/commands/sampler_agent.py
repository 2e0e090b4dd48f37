"""`soak sampler-agent`: sample a target on this node for its run's coordinator."""

from __future__ import annotations

import os
from pathlib import Path

import click
from pydantic import ValidationError

from soak.agents.protocol import TOKEN_ENV, CoordinatorClient
from soak.errors import InputError


@click.command("sampler-agent")
@click.option(
    "--coordinator",
    "coordinator_url",
    required=True,
    help=f"http://HOST:PORT of the run's coordinator (token in ${TOKEN_ENV})",
)
@click.option("--proc-root", default="/proc", help="where this agent sees its node's /proc")
@click.option("--node-fs", default="/", help="where this agent sees its node's files")
def sampler_agent_cmd(coordinator_url: str, proc_root: str, node_fs: str) -> None:
    """Sample a target on this node (its run's `samplers.agent`) for the run's coordinator."""
    from soak.samplers.member import (
        SAMPLERS_ENV,
        TARGET_ENV,
        NodeTarget,
        node_samplers,
        run_sampler_agent,
    )
    from soak.samplers.selection import SamplersConfig

    token = os.environ.get(TOKEN_ENV, "")
    if not token:
        raise InputError(f"--coordinator needs the run's token in {TOKEN_ENV}")
    try:
        cfg = SamplersConfig.model_validate_json(os.environ.get(SAMPLERS_ENV) or "{}")
    except ValidationError as exc:
        raise InputError(f"{SAMPLERS_ENV}: not a samplers section: {exc}") from None
    if cfg.agent is None:
        raise InputError(f"{SAMPLERS_ENV}: no `agent` in the samplers section")
    name = os.environ.get(TARGET_ENV) or "target"
    target = NodeTarget(cfg.agent, name, Path(proc_root), Path(node_fs))
    client = CoordinatorClient(coordinator_url, token, 0)
    try:
        run_sampler_agent(
            node_samplers(cfg, target, Path(proc_root)), client, lease_s=cfg.agent.lease_s
        )
    finally:
        client.close()
