"""`local`: each agent a `soak agent` process on this machine (each runs the usual workers).

Their output goes to a directory and files the run names (soak.runs.layout.AgentFiles,
handed down through make_engine): made at the start, removed with the agents."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from soak.agents.engine import AgentOutput, AgentState, OneByOneEngine
from soak.agents.spec import ROLE, SEGMENT_ENV, AgentSpec
from soak.errors import SoakError

STOP_GRACE_S = 5.0


class LocalEngine(OneByOneEngine):
    name = "local"

    def __init__(self, logs_dir: AgentOutput) -> None:
        self.logs_dir = logs_dir
        self._procs: list[subprocess.Popen[bytes]] = []
        self._dir: Path | None = None

    def _prepare(self, spec: AgentSpec) -> None:
        if self._procs:
            raise SoakError("local agents: start called twice")
        self.logs_dir.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._dir = self.logs_dir.dir

    def _start_agent(self, spec: AgentSpec, index: int) -> None:
        assert self._dir is not None
        segment = f"{index}/{spec.count}"
        env = {**os.environ, **spec.env(), SEGMENT_ENV: segment}
        argv = [sys.executable, "-m", "soak.cli", *spec.argv(segment)]
        with (
            self.logs_dir.out(index).open("wb") as out,
            self.logs_dir.err(index).open("wb") as err,
        ):
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
        self._procs.append(proc)

    def poll(self) -> list[AgentState]:
        out = []
        for i, proc in enumerate(self._procs):
            rc = proc.poll()
            if rc is None:
                out.append(AgentState(i, "running"))
            elif rc == 0:
                out.append(AgentState(i, "complete"))
            else:
                out.append(AgentState(i, "failed", f"exit {rc}: {self._stderr(i)}"))
        return out

    def logs(self, index: int) -> str:
        assert self._dir is not None
        return self.logs_dir.out(index).read_text(encoding="utf-8", errors="replace")

    def remove(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(STOP_GRACE_S)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def sweep(self, run_id: str, role: str = ROLE) -> None:
        """Nothing to remove: local agents of an earlier process stop when their lease ends."""

    def _stderr(self, index: int) -> str:
        assert self._dir is not None
        text = self.logs_dir.err(index).read_text(encoding="utf-8", errors="replace")
        lines = text.strip().splitlines()
        return lines[-1] if lines else "(no output)"
