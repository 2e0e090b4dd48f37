"""What the load agents are started with: `soak agent --segment i/N ...` (soak.load.fleet.agent,
soak.load.fleet.member), the whole run's load config as JSON in their environment, with
the run's seed fixed so every agent derives its own from the same one, and query
files inlined where the agents run on another engine than this machine's.
"""

from __future__ import annotations

import random
from pathlib import Path

import dns.rdatatype

from soak.agents.engine_config import AgentsConfig
from soak.agents.spec import SEGMENT, AgentSpec
from soak.errors import InputError
from soak.load.fleet.agent import LOAD_ENV
from soak.load.generator import JOIN_GRACE_S
from soak.load.load_config import LoadConfig
from soak.load.queries import read_query_file

MAX_INLINE_BYTES = 4 * 1024 * 1024  # query files travel inline in the agents' environment


def agent_load_json(cfg: LoadConfig, base_dir: Path, *, inline_files: bool) -> str:
    """The config every agent is given: seed fixed, files inlined (or made absolute)."""
    data = cfg.model_dump(mode="json", exclude={"agents"})
    if data.get("seed") is None:
        data["seed"] = random.SystemRandom().randrange(1, 2**31)
    inlined = 0
    for qc, out in zip(cfg.mix, data["mix"], strict=True):
        if qc.file is None:
            continue
        path = qc.file if qc.file.is_absolute() else base_dir / qc.file
        if not inline_files:
            out["file"] = str(path)
            continue
        questions = read_query_file(path)
        lines = [
            f"{q.name} {dns.rdatatype.to_text(dns.rdatatype.RdataType(q.rdtype))}"
            for q in questions
        ]
        inlined += sum(len(line) + 1 for line in lines)
        if inlined > MAX_INLINE_BYTES:
            raise InputError(
                f"class {qc.name!r}: query files over {MAX_INLINE_BYTES >> 20} MiB do not travel "
                "to agents inline; use a smaller file or random names"
            )
        out["file"] = None
        out["queries"] = lines
    tls = data.get("tls") or {}
    if tls.get("ca_file") and inline_files:
        raise InputError("tls.ca_file is not shipped to agents on an engine yet (docs/scale.md)")
    return LoadConfig.model_validate(data).model_dump_json(exclude={"agents"})


def build_spec(
    cfg: LoadConfig,
    server: str,
    duration_s: float,
    run_id: str,
    *,
    base_dir: Path,
    tags: dict[str, str] | None = None,
    allow_targets: tuple[str, ...] = (),
    sink: str = "-",
    coordinator: str | None = None,
    token: str | None = None,
) -> AgentSpec:
    agents = cfg.agents or AgentsConfig()
    if duration_s <= 0:
        raise InputError(f"duration must be positive: {duration_s:g}")
    inline = agents.engine != "local"
    command = ["agent", "--segment", SEGMENT, "--server", server]
    command += ["--duration", f"{duration_s:g}", "--sink", sink]
    command += [a for k, v in sorted((tags or {}).items()) for a in ("--tag", f"{k}={v}")]
    command += [a for cidr in allow_targets for a in ("--allow-target", cidr)]
    return AgentSpec(
        run_id=run_id,
        agents=agents,
        duration_s=duration_s,
        command=tuple(command),
        extra_env={LOAD_ENV: agent_load_json(cfg, base_dir, inline_files=inline)},
        drain_s=cfg.timeout_s + JOIN_GRACE_S,
        coordinator=coordinator,
        token=token,
    )
