"""The data directory: every file name in it is spelled here and nowhere else.

```
DATA_DIR/
  state.db            runs, their events and state (runs.state.StateStore)
  points.db           the embedded point store of runs without a sqlite sink path
  token               the control API's bearer token (0600), an admin token
  tokens.db           the teams' tokens (hashed) and which team owns each run
  reserve.bin         space given back when the disk fills (runs.reserve)
  runs/<id>/          one run: result.json, report.html|json|md, spool/, profiles/,
                      <target>.log, <target>-data/ (a process target's default data),
                      agents-<role>/ (local agents' output while they run),
                      capture.soakcap (the target's client queries, with `capture:`),
                      dnstap.sock (where soak listens for them, while the run goes),
                      capture.pcap and tcpdump.log (with `capture.source: pcap`)
  bench/<id>/         `soak bench` results (bench.json, bench.md, bench.html)
```

Outside it: a `soak bench` side's targets write in a temporary `soak-bench-<side>-*`
directory, a standalone `soak load`'s local agents in a temporary
`soak-load-agents-<start>-<token>/`, and an upgrade in `soak-upgrade-<start>-<token>/`
under its work directory (the system temp dir by default; a short path, since servers
put unix sockets in it and a socket path has at most 107 bytes): `soak-upgrade.owner`,
`data/`, `old/`, `new/`, `rollback/` (each version's files, as a run's), `migrate.log`,
`rollback-migrate.log`.
An upgrade's sqlite sink without a path writes `soak-upgrade.db` in the current
directory, and points its sinks did not take stay in a temporary `soak-upgrade-spool-*`
directory.

It is its user's only: the directory 0700 (made so, or tightened, by `make_private`),
and the `soak` command writes with umask 077 (`soak.cli.PRIVATE_UMASK`), so the state, points,
spool, run directories, reports, logs and profiles are 0600/0700 too.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soak.config import Scenario
from soak.runs.runid import run_id_tail
from soak.sinks.destinations import SinkConfig, SqliteSinkConfig
from soak.targets.common import safe_name

PRIVATE_DIR_MODE = 0o700

STATE_DB = "state.db"
POINTS_DB = "points.db"
TOKEN = "token"
TOKENS_DB = "tokens.db"
RESERVE = "reserve.bin"
RUNS = "runs"
BENCH = "bench"
# In a run's directory:
RESULT = "result.json"
SWAPS = "swaps.json"  # a soak with `upgrade:`: each swap as it ran (soak.upgrade.inswap)
SWAP_JUNIT = "swap-{index}-junit.xml"  # its checks as JUnit cases
SWAP_ROLLBACK_JUNIT = "swap-{index}-rollback-junit.xml"  # its rollback's checks
REPORTS = {"html": "report.html", "json": "report.json", "md": "report.md"}
SPOOL = "spool"
PROFILES = "profiles"
TARGET_LOG = "{name}.log"
TARGET_DATA = "{name}-data"
CAPTURE = "capture.soakcap"
DNSTAP_SOCKET = "dnstap.sock"
CAPTURE_PCAP = "capture.pcap"  # `capture.source: pcap`: what tcpdump wrote
CAPTURE_PCAP_LOG = "tcpdump.log"
# In a bench's directory:
BENCH_RESULT = "bench.json"
BENCH_REPORTS = {"md": "bench.md", "html": "bench.html"}
BENCH_SIDE_PREFIX = "soak-bench-{side}-"
# Local agents' output (agents.local), in a run's directory or, for a standalone load,
# in the temp directory:
AGENTS_DIR = "agents-{role}"
AGENT_OUTPUT = {"out": "{index}.out", "err": "{index}.err"}  # a local agent's stdout, stderr
LOAD_AGENTS_PREFIX = "soak-load-agents-"
# `soak compare --out DIR`:
COMPARE_FILES = {"json": "compare.json", "md": "compare.md"}
# An upgrade's, see above:
UPGRADE_RUN_PREFIX = "soak-upgrade-"
UPGRADE_OWNER = "soak-upgrade.owner"
UPGRADE_LOGS_PREFIX = "soak-upgrade-logs-"  # beside the run directory; it has no owner file
UPGRADE_DATA = "data"
UPGRADE_MIGRATE_LOGS = {"up": "migrate.log", "down": "rollback-migrate.log"}
UPGRADE_SQLITE = "soak-upgrade.db"
UPGRADE_SPOOL_PREFIX = "soak-upgrade-spool-"


def default_root() -> Path:
    """$SOAK_HOME, else ~/.local/share/soak (XDG_DATA_HOME honoured)."""
    if os.environ.get("SOAK_HOME"):
        return Path(os.environ["SOAK_HOME"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "soak"


def make_private(root: Path) -> Path:
    """`root` made 0700, or tightened to it when it is ours and others could read it: it
    holds scenarios, reports, target logs and rendered configs."""
    root.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    st = root.stat()
    if st.st_mode & 0o077 and st.st_uid == os.getuid():
        root.chmod(PRIVATE_DIR_MODE)
    return root


@dataclass(frozen=True)
class DataDir:
    """A data directory's paths; nothing is created until a caller writes."""

    root: Path

    @classmethod
    def default(cls, root: Path | None = None) -> DataDir:
        return cls(root if root is not None else default_root())

    def create(self) -> DataDir:
        """The directory made, private (see make_private)."""
        make_private(self.root)
        return self

    @property
    def state_db(self) -> Path:
        return self.root / STATE_DB

    @property
    def points_db(self) -> Path:
        return self.root / POINTS_DB

    @property
    def token(self) -> Path:
        return self.root / TOKEN

    @property
    def tokens_db(self) -> Path:
        return self.root / TOKENS_DB

    @property
    def reserve(self) -> Path:
        return self.root / RESERVE

    @property
    def bench(self) -> Path:
        return self.root / BENCH

    def run_dir(self, run_id: str) -> Path:
        return self.root / RUNS / run_id

    def points_path(self, scenario: Scenario, run_dir: Path) -> Path:
        """Where a run's embedded store is (the first sqlite sink's path, else points.db)."""
        for cfg in scenario.sinks:
            if isinstance(cfg, SqliteSinkConfig) and cfg.path:
                path = Path(cfg.path)
                return path if path.is_absolute() else run_dir / path
        return self.points_db


def with_embedded_store(configs: list[SinkConfig]) -> list[SinkConfig]:
    """The sinks asked for, plus the embedded store if absent: verdicts and reports read it."""
    if any(isinstance(c, SqliteSinkConfig) for c in configs):
        return list(configs)
    return [*configs, SqliteSinkConfig(kind="sqlite")]


def result_path(run_dir: Path) -> Path:
    return run_dir / RESULT


def report_path(run_dir: Path, fmt: str) -> Path:
    return run_dir / REPORTS[fmt]


def spool_dir(run_dir: Path) -> Path:
    return run_dir / SPOOL


def profiles_dir(run_dir: Path) -> Path:
    """The Go profiles a run keeps (soak.profiles names the files in it)."""
    return run_dir / PROFILES


def capture_path(run_dir: Path) -> Path:
    """The capture a run with `capture:` records of its target (a later run replays it)."""
    return run_dir / CAPTURE


def capture_pcap_paths(run_dir: Path) -> tuple[Path, Path]:
    """The pcap a run with `capture.source: pcap` has tcpdump write, and tcpdump's log."""
    return run_dir / CAPTURE_PCAP, run_dir / CAPTURE_PCAP_LOG


def dnstap_socket(run_dir: Path) -> Path:
    """Where a run with `capture:` listens for its target's dnstap by default."""
    return run_dir / DNSTAP_SOCKET


@dataclass(frozen=True)
class TargetFiles:
    """Where the targets of a run write, in its directory: `dir` (rendered config files,
    sockets), each target's log and a process target's default data directory.
    soak.targets takes these paths; it names no file of its own."""

    dir: Path

    def log(self, target: str) -> Path:
        return self.dir / TARGET_LOG.format(name=safe_name(target))

    def data(self, target: str) -> Path:
        return self.dir / TARGET_DATA.format(name=safe_name(target))


@dataclass(frozen=True)
class AgentFiles:
    """Where local agents write their output while they run: `dir`, and in it each
    agent's stdout and stderr (soak.agents.local takes these paths; it names no file)."""

    dir: Path

    def out(self, index: int) -> Path:
        return self.dir / AGENT_OUTPUT["out"].format(index=index)

    def err(self, index: int) -> Path:
        return self.dir / AGENT_OUTPUT["err"].format(index=index)


def agents_dir(run_dir: Path, role: str) -> AgentFiles:
    """Where a run's local agents of `role` write their output while they run."""
    return AgentFiles(run_dir / AGENTS_DIR.format(role=role))


def load_agents_dir(run_id: str) -> AgentFiles:
    """A standalone load's (it has no run directory): in the temp directory, a short path."""
    return AgentFiles(Path(tempfile.gettempdir()) / f"{LOAD_AGENTS_PREFIX}{run_id_tail(run_id)}")


def upgrade_run_dir(base: Path, run_id: str) -> Path:
    return base / f"{UPGRADE_RUN_PREFIX}{run_id_tail(run_id)}"


def upgrade_logs_dir(run_dir: Path) -> Path:
    """Where a failed upgrade run's logs are kept after its run directory goes: beside
    it, with its token (`soak-upgrade-TOKEN` -> `soak-upgrade-logs-TOKEN`)."""
    return run_dir.parent / f"{UPGRADE_LOGS_PREFIX}{run_dir.name.removeprefix(UPGRADE_RUN_PREFIX)}"


def upgrade_owner_files(base: Path) -> list[Path]:
    """The owner files of the upgrade run directories under `base`."""
    return sorted(base.glob(f"{UPGRADE_RUN_PREFIX}*/{UPGRADE_OWNER}"))


def upgrade_owner_file(run_dir: Path) -> Path:
    return run_dir / UPGRADE_OWNER


def upgrade_data_dir(run_dir: Path) -> Path:
    return run_dir / UPGRADE_DATA


def targets_dir(run_dir: Path, key: str) -> Path:
    """The files of the targets a run starts under `key` (an upgrade's old, new,
    rollback version: see runs.live_targets)."""
    return run_dir / key


def upgrade_migrate_log(run_dir: Path, direction: str) -> Path:
    return run_dir / UPGRADE_MIGRATE_LOGS[direction]


def compare_paths(out_dir: Path) -> tuple[Path, Path]:
    """`soak bench compare --out`: (the JSON, the markdown)."""
    return out_dir / COMPARE_FILES["json"], out_dir / COMPARE_FILES["md"]


def read_result(run_dir: Path) -> dict[str, Any] | None:
    """A finished run's result file; None if it has none (yet) or it is unreadable."""
    try:
        data = json.loads(result_path(run_dir).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def swaps_path(run_dir: Path) -> Path:
    return run_dir / SWAPS


def swap_junit_path(run_dir: Path, index: int, rollback: bool = False) -> Path:
    return run_dir / (SWAP_ROLLBACK_JUNIT if rollback else SWAP_JUNIT).format(index=index)


def read_swaps(run_dir: Path) -> list[dict[str, Any]]:
    """The swaps a run has made so far, in order (none without `upgrade:` or before its
    first swap; an unreadable file reads as none)."""
    try:
        data = json.loads(swaps_path(run_dir).read_text())
    except (OSError, ValueError):
        return []
    return [s for s in data if isinstance(s, dict)] if isinstance(data, list) else []


def write_swaps(run_dir: Path, swaps: list[dict[str, Any]]) -> None:
    """Replaced whole (a reader never sees half a file)."""
    path = swaps_path(run_dir)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(swaps, indent=1))
    partial.replace(path)


def bench_result_path(out_dir: Path) -> Path:
    return out_dir / BENCH_RESULT
