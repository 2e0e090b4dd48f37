"""A version of an upgrade run as the plan starts it: its target as rendered, why it failed
to start, what its readiness means (any answer), and the exact answers its probes ask
for, as cases."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from soak.errors import TargetStartError
from soak.targets import readiness
from soak.targets.base import Running
from soak.targets.specs import DnsProbe, DockerTarget, ProcessTarget, TargetConfig
from soak.upgrade.cases import PROBE_KIND
from soak.upgrade.checklist import CheckResult
from soak.upgrade.config import UpgradePlan
from soak.upgrade.template import Values

# How soak.targets folds a start log into its one-line error (quote_tail): the case's
# message is the reason before it; the log lines go into the case's body, once.
LOG_QUOTES = ("; log lines that look like errors: ", "; last log lines: ", "; its log is empty")


def reason_of(start_error: str) -> str:
    """A target's start error without the log lines folded into it."""
    cut = min((i for q in LOG_QUOTES if (i := start_error.find(q)) >= 0), default=-1)
    return start_error if cut < 0 else start_error[:cut]


class VersionFailed(TargetStartError):
    """A version that was launched and then exited or never got ready, with its log;
    `full`: the one-line error with the log folded in, for the terminal and stderr."""

    def __init__(self, side: str, message: str, log_lines: list[str], full: str) -> None:
        super().__init__(message)
        self.side = side
        self.log_lines = log_lines
        self.full = full

    def one_line(self) -> str:
        return self.full


def output_block(values: Values, title: str, lines: list[str] | None) -> str:
    """Lines for a case's body, one a line, under a title."""
    if not lines:
        return ""
    return f"{title}:\n" + "\n".join(values.redact(ln.rstrip()) for ln in lines)


def answers_enough(cfg: TargetConfig) -> TargetConfig:
    """The version's spec with its DNS readiness probes asking for any answer: a new
    version that answers has started; what it answers is judged by the probe's case."""
    probes = [
        p.model_copy(update={"rcode": None, "answer": None}) if isinstance(p, DnsProbe) else p
        for p in cfg.ready.probes
    ]
    ready = cfg.ready.model_copy(update={"probes": probes})
    return cfg.model_copy(update={"ready": ready})


def probe_result(name: str, probe: DnsProbe, running: Running, cfg: TargetConfig) -> CheckResult:
    """The probe tried until it passes or the version's readiness timeout (from its
    start) has passed; the last attempt's answer is the verdict."""
    start_s = time.monotonic()
    deadline_s = running.started_monotonic_s + cfg.ready.timeout_s
    attempts = 0
    while True:
        attempts += 1
        outcome = readiness.check(probe, running, timeout_s=1.0)
        if outcome.ok or time.monotonic() >= deadline_s:
            break
        time.sleep(cfg.ready.interval_s)
    want = readiness.describe(probe).rpartition(" -> ")[2]
    return CheckResult(
        name,
        PROBE_KIND,
        "pass" if outcome.ok else "fail",
        (time.monotonic() - start_s) * 1000.0,
        want,
        outcome.detail,
        attempts,
    )


def version_cfg(
    plan: UpgradePlan,
    values: Values,
    side: str,
    cfg: TargetConfig,
    old_ports: dict[str, int],
    data_dir: Path | None,
) -> TargetConfig:
    """A version's target as it starts: the plan's values filled in, on the plan's data
    (a process version's data_dir; a docker one's volume, or the host directory mounted
    there), and with a load through the swap, the new version where the old listened."""
    raw: dict[str, Any] = values.render(cfg.model_dump(by_alias=True, exclude_unset=True))
    if side == "new" and plan.load is not None:
        # The load keeps its address: new listens where old did.
        for name, port in raw.get("ports", {}).items():
            if name in old_ports and port.get("host") is None:
                port["host"] = old_ports[name]
    if isinstance(cfg, ProcessTarget):
        raw["data_dir"] = str(data_dir)
    if isinstance(cfg, DockerTarget) and cfg.volume is None:
        raise TargetStartError(f"{side}: a docker version needs `volume:` for its data")
    if isinstance(cfg, DockerTarget) and cfg.volume is not None and data_dir:
        # A plan with a process version too: the host directory at the volume's mount.
        mount = {"source": str(data_dir), "target": cfg.volume.mount}
        raw["mounts"] = [*raw.get("mounts", []), mount]
        raw["volume"] = None
    adapter: TypeAdapter[TargetConfig] = TypeAdapter(TargetConfig)
    return adapter.validate_python(raw)
