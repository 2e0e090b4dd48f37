"""The `process` runtime: a local binary in its own session, logs to a file.

Its whole process tree is its own (targets/tree.py): every process carries the target's
mark, so children that fork into the background are found and stopped with it. A
foreground run's target dies with the soak process (a parent-death signal); a service's
run outlives a service restart, which resumes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from soak.errors import InputError, TargetStartError
from soak.placeholders import render, render_all, render_map
from soak.procfs import pid_alive, start_ticks
from soak.targets.base import ExitInfo, FilePaths, Running
from soak.targets.common import RuntimeBase
from soak.targets.ports import allocate_ports
from soak.targets.render import remove_secret_files, resolve, write_files
from soak.targets.specs import ProcessTarget
from soak.targets.tree import (
    KILL_WAIT_S,
    MARK_ENV,
    die_with_parent,
    forked_message,
    kill_all,
    own_mark,
    pids_of,
)

SETTLE_S = 1.0  # a daemon forks twice: how long its middle process may take to go
SETTLE_STEP_S = 0.05


def group_alive(pgid: int) -> bool:
    """True while any process of the process group exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exit_info_from_returncode(code: int) -> ExitInfo:
    """subprocess reports death by signal N as -N."""
    return ExitInfo(None, signal=-code) if code < 0 else ExitInfo(code)


class ProcessRuntime(RuntimeBase):
    runtime = "process"
    cfg: ProcessTarget

    def __init__(
        self,
        cfg: ProcessTarget,
        *,
        files: FilePaths,
        run_id: str,
        base_dir: Path,
        resumable_in: Path | None = None,
    ) -> None:
        """`resumable_in`: the data directory of a service that resumes the run after a
        restart; None (a foreground run, bench, upgrade): the target dies with soak."""
        super().__init__(cfg, files=files, run_id=run_id, base_dir=base_dir)
        self.resumable_in = resumable_in
        self.proc: subprocess.Popen[bytes] | None = None
        self._exit: ExitInfo | None = None
        self._binary = cfg.argv[0] if cfg.argv else self.name
        self.forked: list[int] = []  # what stayed when the main process exited

    # ---------------------------------------------------------------- start

    def _data_dir(self, ports: dict[str, int]) -> Path:
        if self.cfg.data_dir is None:
            return self.files.data(self.name).resolve()
        text = render(self.cfg.data_dir, self.placeholders(ports, None), f"{self.name}.data_dir")
        return resolve(text, self.base_dir)

    def _argv(self, ports: dict[str, int], data_dir: Path) -> list[str]:
        values = self.placeholders(ports, str(data_dir))
        argv = render_all(self.cfg.argv, values, f"{self.name}.argv")
        binary = argv[0]
        if "/" in binary:
            path = resolve(binary, self.base_dir)
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise TargetStartError(f"{self.name}: binary not found or not executable: {path}")
            argv[0] = str(path)
        elif shutil.which(binary, path=self._env(values).get("PATH")) is None:
            raise TargetStartError(f"{self.name}: binary not found on PATH: {binary}")
        return argv

    def _env(self, values: Any) -> dict[str, str]:
        env = dict(os.environ)
        env.update(render_map(self.cfg.env, values, f"{self.name}.env"))
        env[MARK_ENV] = own_mark(self.run_id, self.name, self.resumable_in).text()
        return env

    def start(self) -> Running:
        """Started in its own session (survives a service restart); not yet ready."""
        if self.running is not None and self.poll() is None:
            raise TargetStartError(f"{self.name}: already running (pid {self.running.pid})")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        ports = allocate_ports(self.name, self.cfg.ports, self.cfg.host)
        data_dir = self._data_dir(ports)
        data_dir.mkdir(parents=True, exist_ok=True)
        argv, env, cwd = self._launch_spec(ports, data_dir)
        write_files(
            self.cfg.files, self.placeholders(ports, str(data_dir)), self.run_dir, self.base_dir
        )
        self.running = self._new_running(ports=ports, pid=None, data_dir=data_dir)
        self._spawn(argv, env, cwd)
        return self.running

    def _launch_spec(
        self, ports: dict[str, int], data_dir: Path
    ) -> tuple[list[str], dict[str, str], Path]:
        values = self.placeholders(ports, str(data_dir))
        argv = self._argv(ports, data_dir)
        cwd = data_dir
        if self.cfg.cwd:
            cwd = resolve(render(self.cfg.cwd, values, f"{self.name}.cwd"), self.base_dir)
        return argv, self._env(values), cwd

    def _spawn(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        running = self._require_running()
        self._exit = None
        self.forked = []
        self._binary = argv[0]
        self.mark_log_start()
        preexec = None if self.resumable_in is not None else die_with_parent(os.getpid())
        with open(self.log_path, "ab") as log_file:  # appends across restarts
            try:
                self.proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    cwd=cwd,
                    env=env,
                    start_new_session=True,  # own process group; survives a service restart
                    preexec_fn=preexec,
                )
            except OSError as exc:
                self.running = None
                raise TargetStartError(f"{self.name}: cannot start {argv[0]}: {exc}") from exc
        running.pid = self.proc.pid
        running.pid_start_ticks = start_ticks(self.proc.pid)
        running.started_monotonic_s = time.monotonic()

    # ---------------------------------------------------------------- while running

    def poll(self) -> ExitInfo | None:
        if self._exit is not None:
            return self._exit
        if self.proc is not None:
            code = self.proc.poll()
            if code is not None:
                self._exit = self._forked_or(exit_info_from_returncode(code))
            return self._exit
        running = self.running
        if running is None or running.pid is None:
            return None
        # Re-attached: not our child, so only "gone" is known, not how it ended.
        if not pid_alive(running.pid, running.pid_start_ticks):
            self._exit = ExitInfo(None)
        return self._exit

    def _forked_or(self, info: ExitInfo) -> ExitInfo:
        """`info`, or, when the main process exited 0 and left processes of the target
        behind, the same marked as a fork into the background."""
        if info.exit_code != 0:
            return info
        self.forked = self._settled_leftovers()
        if not self.forked:
            return info
        return dataclasses.replace(info, forked=forked_message(self._binary, self.forked))

    def _settled_leftovers(self) -> list[int]:
        """The target's processes still alive after its main one exited: a daemon's. Its
        middle process goes a moment later, so the set is read until it holds still."""
        found = pids_of(self.run_id, self.name)
        deadline_s = time.monotonic() + SETTLE_S
        while found and time.monotonic() < deadline_s:
            time.sleep(SETTLE_STEP_S)
            again = pids_of(self.run_id, self.name)
            if again == found:
                break
            found = again
        return found

    def _on_ready(self, running: Running) -> None:
        """A daemon can answer before its parent has exited: a process of the target in a
        session of its own at this moment means a fork into the background, if the main
        process then exits (one that stays keeps a helper of its own there: fine)."""
        if self.proc is None or not self._in_other_sessions(running.pid):
            return
        try:
            self.proc.wait(SETTLE_S)
        except subprocess.TimeoutExpired:
            return
        info = self.poll()
        assert info is not None
        raise self.fail_start(self.early_exit_message(info))

    def _in_other_sessions(self, leader: int | None) -> list[int]:
        found = []
        for pid in pids_of(self.run_id, self.name):
            with contextlib.suppress(ProcessLookupError):
                if pid != leader and os.getsid(pid) != leader:
                    found.append(pid)
        return found

    def early_exit_message(self, info: ExitInfo) -> str:
        if info.forked is not None:
            return info.forked
        return super().early_exit_message(info)

    def stop(self) -> ExitInfo | None:
        """SIGTERM to the process group, SIGKILL after stop_timeout_s; no process left, and
        no rendered file that holds a secret."""
        try:
            return self._stop_processes()
        finally:
            remove_secret_files(self.cfg.files, self.run_dir, self.base_dir)

    def _stop_processes(self) -> ExitInfo | None:
        running = self.running
        if running is None or running.pid is None:
            return None
        pgid = running.pid  # start_new_session: the leader's pid is the group id
        requested = self.poll() is None
        if requested:
            self._signal_group(pgid, signal.SIGTERM)
            if not self._wait_exit(self.cfg.stop_timeout_s):
                self._signal_group(pgid, signal.SIGKILL)
                self._wait_exit(KILL_WAIT_S)
        # Children that outlived the leader (forked workers) go too.
        if group_alive(pgid):
            self._signal_group(pgid, signal.SIGKILL)
            deadline_s = time.monotonic() + KILL_WAIT_S
            while group_alive(pgid) and time.monotonic() < deadline_s:
                time.sleep(0.02)
        self._kill_marked()
        info = self.poll()
        if requested and info is not None:
            self._exit = info = dataclasses.replace(info, requested=True)
        return info

    def _kill_marked(self) -> None:
        """Whatever carries the target's mark (a daemon in a session of its own): killed
        until none is left, as a process that is forking may add one meanwhile."""
        deadline_s = time.monotonic() + KILL_WAIT_S
        while (pids := pids_of(self.run_id, self.name)) and time.monotonic() < deadline_s:
            kill_all(pids)

    def _signal_group(self, pgid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)

    def _wait_exit(self, timeout_s: float) -> bool:
        if self.proc is not None:
            try:
                self.proc.wait(timeout_s)
                self.poll()
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline_s = time.monotonic() + timeout_s
        while time.monotonic() < deadline_s:
            if self.poll() is not None:
                return True
            time.sleep(0.05)
        return False

    def restart(self) -> Running:
        """Stop (if still alive) and start again: same ports, same data directory."""
        running = self._require_running()
        self.stop()
        data_dir = running.data_dir or self._data_dir(running.ports)
        argv, env, cwd = self._launch_spec(running.ports, data_dir)
        running.ready_after_s = None
        running.fd_limit = None
        running.conditions_s.clear()
        self._spawn(argv, env, cwd)
        running.restarts += 1
        return running

    def attach(self, state: dict[str, Any]) -> Running:
        """Adopts a process started by an earlier soak service (same host)."""
        if not state.get("pid"):
            raise InputError(f"{self.name}: no pid in the saved state; cannot re-attach")
        self.running = Running.from_state(state)
        self.proc = None
        self._exit = None
        if self.running.log_path is not None:
            self.log_path = self.running.log_path
        return self.running
