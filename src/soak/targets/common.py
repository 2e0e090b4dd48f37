"""What every runtime shares: paths, placeholders, the readiness loop, log tails."""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from pathlib import Path
from typing import Any

from soak.errors import TargetStartError
from soak.placeholders import Placeholders
from soak.procfs import read_fd_limit
from soak.targets import readiness
from soak.targets.base import ExitInfo, FilePaths, Running
from soak.targets.specs import Probe, TargetBase

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 12
START_LOG_LINES = 400  # what a start failure searches for error lines
PROBE_TIMEOUT_S = 1.0  # one attempt; the loop retries until the readiness timeout


def safe_name(text: str) -> str:
    """A name usable in file, container and volume names."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "target"


def _read_last(path: Path, since_bytes: int = 0, limit_bytes: int = 65536) -> str:
    """The text of a log file from `since_bytes` on, at most its last `limit_bytes`."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(since_bytes if since_bytes <= size else 0, size - limit_bytes))
        return f.read().decode(errors="replace")


def tail_lines(path: Path | None, lines: int = LOG_TAIL_LINES, since_bytes: int = 0) -> list[str]:
    """The last non-empty lines of a log file (from `since_bytes` on), reading at most its
    last 64 KiB."""
    if path is None:
        return []
    try:
        text = _read_last(path, since_bytes)
    except OSError:
        return []
    return list(deque((ln for ln in text.splitlines() if ln.strip()), maxlen=lines))


# What a server prints when it gives up: usage text after "invalid option" says less than
# the one line before it, so lines like these are quoted first.
ERROR_LINE_RE = re.compile(
    r"\b(error|errors|fatal|failed|failure|fails?|invalid|illegal|cannot|can't|could not|"
    r"couldn't|unable|denied|not permitted|not found|no such|unknown|unrecogni[sz]ed|"
    r"refused|panic|abort(ed)?|bad|missing|not allowed|in use)\b",
    re.IGNORECASE,
)
ERROR_LINES_MAX = 4
TAIL_AFTER_ERRORS = 6  # with error lines quoted, a shorter tail keeps the line readable


def error_lines(lines: list[str], limit: int = ERROR_LINES_MAX) -> list[str]:
    """The first lines that look like an error (the cause comes before its consequences)."""
    return [ln for ln in lines if ERROR_LINE_RE.search(ln)][:limit]


def quote_tail(lines: list[str], log_path: Path | None = None) -> str:
    """Log lines folded into the one-line error: the error-looking lines first, then the
    tail, ' | '-separated, each trimmed; the log file named."""
    where = f" (log: {log_path})" if log_path is not None else ""
    if not lines:
        return f"its log is empty{where}"
    errors = error_lines(lines)
    tail_count = TAIL_AFTER_ERRORS if errors else LOG_TAIL_LINES
    tail = [ln for ln in lines[-tail_count:] if ln not in errors]
    parts = []
    if errors:
        parts.append("log lines that look like errors: " + _fold(errors))
    if tail:
        parts.append(("then " if errors else "") + "last log lines: " + _fold(tail))
    return "; ".join(parts) + where


def _fold(lines: list[str]) -> str:
    return " | ".join(ln.strip()[:200] for ln in lines)


class RuntimeBase:
    """The lifecycle parts that do not depend on how the target runs."""

    runtime = ""

    def __init__(self, cfg: TargetBase, *, files: FilePaths, run_id: str, base_dir: Path) -> None:
        self.cfg = cfg
        self.name = cfg.name
        # Absolute: the target's cwd is its data directory, not ours.
        self.files = files
        self.run_dir = files.dir.resolve()
        self.run_id = run_id
        self.base_dir = base_dir.resolve()
        self.log_path = files.log(cfg.name).resolve()
        # Where the latest start's output begins in the log (it appends across restarts).
        self.log_start_bytes = 0
        self.running: Running | None = None
        # The connections a run's load holds to this target (None: no load to weigh its
        # open-files limit against): set by the group that starts it.
        self.load_connections: int | None = None

    # Subclasses implement these.
    def poll(self) -> ExitInfo | None:
        raise NotImplementedError

    def stop(self) -> ExitInfo | None:
        raise NotImplementedError

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        return tail_lines(self.log_path, lines)

    def start_log(self) -> list[str]:
        """What the latest start printed, for a start failure's message."""
        return tail_lines(self.log_path, START_LOG_LINES, self.log_start_bytes)

    def mark_log_start(self) -> None:
        """Called just before a start: the failure message quotes only what follows."""
        try:
            self.log_start_bytes = self.log_path.stat().st_size
        except OSError:
            self.log_start_bytes = 0

    def early_exit_message(self, info: ExitInfo) -> str:
        """Why a start failed when the target exited before it was ready."""
        return f"{info.describe()} before it was ready"

    def _abort(self) -> None:
        """Undo a start that failed; the default is a stop."""
        self.stop()

    # ---------------------------------------------------------------- shared

    def placeholders(self, ports: dict[str, int], data_dir: str | None) -> Placeholders:
        return Placeholders(
            run_dir=str(self.run_dir),
            host=self.cfg.host,
            ports=ports,
            data_dir=data_dir,
            base_dir=self.base_dir,
        )

    def _require_running(self) -> Running:
        if self.running is None:
            raise TargetStartError(f"{self.name}: not started")
        return self.running

    def fail_start(self, message: str) -> TargetStartError:
        """Stops what was started and builds the one-line error quoting the log."""
        lines = self.start_log()
        self._abort()
        path = self.log_path if self.log_path.exists() else None  # an external target: none
        return TargetStartError(f"{self.name}: {message}; {quote_tail(lines, path)}")

    def wait_ready(self) -> Running:
        """Until every probe passes and every named condition has been met once.

        Records start-to-ready and each condition's time from start. The
        resolution of these figures is the readiness interval.
        """
        running = self._require_running()
        ready = self.cfg.ready
        probes = ready.probes or readiness.default_probes(self.cfg.ports)
        pending = {k: v for k, v in ready.conditions.items() if k not in running.conditions_s}
        start_s = running.started_monotonic_s
        next_s = time.monotonic()
        detail = "no probe tried yet"
        while True:
            exit_info = self.poll()
            if exit_info is not None:
                raise self.fail_start(self.early_exit_message(exit_info))
            if running.ready_after_s is None:
                ok, detail = self._all_pass(probes, running)
                if ok:
                    running.ready_after_s = time.monotonic() - start_s
            self._check_conditions(pending, running)
            if running.ready_after_s is not None and not pending:
                break
            now_s = time.monotonic()
            if running.ready_after_s is None and now_s - start_s > ready.timeout_s:
                raise self.fail_start(f"not ready after {ready.timeout_s:g} s ({detail})")
            if pending and now_s - start_s > ready.condition_timeout_s:
                names = ", ".join(sorted(pending))
                raise self.fail_start(
                    f"condition {names} not met after {ready.condition_timeout_s:g} s"
                )
            next_s += ready.interval_s  # absolute grid: probe time does not stretch it
            time.sleep(max(0.0, next_s - time.monotonic()))
        self._on_ready(running)
        self._record_fd_limit(running)
        return running

    def _on_ready(self, running: Running) -> None:
        """Hook: what a runtime learns only once the target is up (docker: the PID)."""

    def _all_pass(self, probes: list[Probe], running: Running) -> tuple[bool, str]:
        for probe in probes:
            outcome = readiness.check(probe, running, PROBE_TIMEOUT_S, self.base_dir)
            if not outcome.ok:
                return False, f"{readiness.describe(probe)}: {outcome.detail}"
        return True, "ready"

    def _check_conditions(self, pending: dict[str, Probe], running: Running) -> None:
        for name, probe in list(pending.items()):
            if readiness.check(probe, running, PROBE_TIMEOUT_S, self.base_dir).ok:
                running.conditions_s[name] = time.monotonic() - running.started_monotonic_s
                del pending[name]

    def _record_fd_limit(self, running: Running) -> None:
        if running.pid is None:
            return
        running.fd_limit = read_fd_limit(running.pid)
        warning = readiness.fd_limit_warning(
            self.name, running.fd_limit, self.runtime, self.load_connections
        )
        if warning is not None:
            log.warning("%s", warning)
            running.warnings.append(warning)

    def _new_running(self, **fields: Any) -> Running:
        return Running(
            name=self.name,
            host=self.cfg.host,
            runtime=self.runtime,
            run_dir=self.run_dir,
            log_path=self.log_path,
            started_monotonic_s=time.monotonic(),
            **fields,
        )
