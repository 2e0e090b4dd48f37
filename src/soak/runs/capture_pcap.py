"""A run that records its own target's client queries with tcpdump (`capture.source:
pcap`, docs/replay.md): for a server that writes no dnstap.

Once the target is up, tcpdump records what goes to the load's server address (its
host and port, UDP and TCP) on `capture.interface` into the run's directory; the run
waits until it listens before its origin. When the span or the run ends, tcpdump stops
and the pcap becomes the run's capture file, read by the same reader as `soak capture
--from` (soak.traffic.pcap), kept from the run's origin and for `capture.duration_s`,
at most `capture.max_queries`. tcpdump needs CAP_NET_RAW: root, or the capability given
to its binary; without it the run ends at its start with tcpdump's own line.

tcpdump carries the run's process mark (targets/tree.py) as "tcpdump (capture)": a
soak SIGKILLed while it records leaves it running, and the next soak command's sweep
finds and stops it. A foreground run's tcpdump also dies with its soak process at once;
a service's is left to that sweep, since a resumed run starts no capture of its own.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from soak.clock import s_to_ns
from soak.errors import TargetStartError
from soak.points import Fault
from soak.runs.capture_dnstap import SETTLE_S, write_kept
from soak.runs.layout import capture_path, capture_pcap_paths
from soak.targets.tree import MARK_ENV, die_with_parent, own_mark
from soak.traffic.capture_config import CaptureConfig
from soak.traffic.capture_file import Builder
from soak.traffic.pcap import read_pcap

# How long tcpdump may take to open the interface and say it listens.
LISTEN_WAIT_S = 10.0
STOP_WAIT_S = 5.0
POLL_S = 0.05
# Packets tcpdump writes at most (-c), per query kept: a TCP query's connection adds a
# SYN and ACKs to it, and the file must stay bounded as the kept queries are.
PACKETS_PER_QUERY = 4
MARK_NAME = "tcpdump (capture)"  # its mark's target: what the sweep's line names
_STATS = re.compile(r"^(\d+) packets? (captured|received by filter|dropped by kernel)", re.M)


def tcpdump_argv(cfg: CaptureConfig, host: str, port: int, pcap: Path) -> list[str]:
    """tcpdump writing each packet as it comes (-U, --immediate-mode) of what goes to
    `host`:`port`; as root it keeps root (-Z root) to write into the run's directory."""
    argv = ["tcpdump", "-i", cfg.interface, "-n", "-U", "--immediate-mode", "-s", "0"]
    argv += ["-c", str(cfg.max_queries * PACKETS_PER_QUERY), "-w", str(pcap)]
    if os.geteuid() == 0:
        argv += ["-Z", "root"]
    return [*argv, f"dst host {host} and dst port {port}"]


def tcpdump_stats(log: str) -> dict[str, int]:
    """tcpdump's counts at its exit: captured, received by filter, dropped by kernel."""
    return {m.group(2).split()[0]: int(m.group(1)) for m in _STATS.finditer(log)}


class PcapCapture:
    """One run's recording through tcpdump: started once the target is up (`attach`),
    begun at the run's origin, checked every tick, finished once the target stopped."""

    def __init__(
        self, cfg: CaptureConfig, run_dir: Path, run_id: str, *, dies_with_owner: bool
    ) -> None:
        """`dies_with_owner`: a foreground run's (its soak process is the run)."""
        self.cfg = cfg
        self.run_id = run_id
        self.dies_with_owner = dies_with_owner
        self.out = capture_path(run_dir)
        self.pcap, self.log = capture_pcap_paths(run_dir)
        self.proc: subprocess.Popen[bytes] | None = None
        self.where = ""
        self.origin_ns: int | None = None
        self.until_ns: int | None = None
        self.written: dict[str, Any] | None = None
        self._exit_told = False

    def attach(self, host: str, port: int) -> str:
        """tcpdump started on what goes to the target, and listening (TargetStartError
        with its own line if it cannot: not installed, no permission); what is recorded."""
        self.where = f"{self.cfg.interface} to {host}:{port}"
        argv = tcpdump_argv(self.cfg, host, port, self.pcap)
        env = {**os.environ, MARK_ENV: own_mark(self.run_id, MARK_NAME, None).text()}
        preexec = die_with_parent(os.getpid()) if self.dies_with_owner else None
        with self.log.open("wb") as log:
            try:
                self.proc = subprocess.Popen(
                    argv, stdout=log, stderr=log, env=env, preexec_fn=preexec
                )
            except OSError as exc:
                raise TargetStartError(f"capture: tcpdump: {exc.strerror or exc}") from None
        deadline = time.monotonic() + LISTEN_WAIT_S
        while "listening on" not in self._log_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                said = tcpdump_said(self._log_text(), "did not say it listens")
                raise TargetStartError(f"capture: tcpdump on {self.where}: {said}")
            time.sleep(POLL_S)
        return f"capture: tcpdump on {self.where}, into {self.pcap}"

    def begin(self, origin_ns: int) -> None:
        self.origin_ns = origin_ns
        if self.cfg.duration_s is not None:
            self.until_ns = origin_ns + s_to_ns(self.cfg.duration_s)

    def check(self, now_ns: int) -> list[Fault]:
        """tcpdump gone before its time (its packet bound reached, or failed), and the
        span's file once the span is over, as the run's events."""
        if self.proc is None or self.written is not None:
            return []
        faults = []
        code = self.proc.poll()
        if code is not None and not self._exit_told:
            self._exit_told = True
            faults.append(self._exit_fault(code))
        if self.until_ns is not None and now_ns >= self.until_ns + s_to_ns(SETTLE_S):
            faults += self._write()
        return faults

    def flush(self) -> None:
        """Nothing to wait for: tcpdump writes each packet as it comes."""

    def finish(self, drain_s: float = 0.0) -> list[Fault]:
        """After the target stopped: tcpdump stopped, the capture written (unless the
        span's file already was)."""
        if self.proc is None or self.written is not None:
            self.close()
            return []
        return self._write()

    def close(self) -> None:
        """tcpdump stopped (SIGTERM: it writes what it holds and its counts)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    # ---------------------------------------------------------------- what is told

    def _exit_fault(self, code: int) -> Fault:
        stats = tcpdump_stats(self._log_text())
        if code == 0 and stats.get("captured", 0) >= self.cfg.max_queries * PACKETS_PER_QUERY:
            message = (
                f"capture: tcpdump stopped after {stats['captured']:,} packets"
                f" ({PACKETS_PER_QUERY} x capture.max_queries); later queries are not seen"
            )
            return Fault("capture_full", message, float(stats["captured"]))
        said = tcpdump_said(self._log_text(), f"exit {code}")
        message = f"capture: tcpdump on {self.where} exited ({code}): {said}"
        return Fault("capture_failed", message, float(code))

    def _write(self) -> list[Fault]:
        self.close()
        stats = tcpdump_stats(self._log_text())
        dropped = stats.get("dropped", 0)
        more = f"{dropped:,} packets dropped by the kernel before tcpdump" if dropped else ""
        recording = Builder(f"pcap:{self.where}", self.cfg.clients_by_port, self.cfg.max_queries)
        recording.until_ns = self.until_ns
        try:
            read_pcap(self.pcap, into=recording)
        except Exception as exc:  # what it holds cannot be read: said, nothing written
            self.written = {"queries": 0, "error": str(exc)}
            return [Fault("capture_failed", f"capture: reading {self.pcap}: {exc}", 0.0)]
        self.written, faults = write_kept(
            recording, self.origin_ns or 0, self.out, self.where, more
        )
        return faults

    def _log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


def tcpdump_said(log: str, otherwise: str) -> str:
    """tcpdump's own last line about itself ("tcpdump: lo: You don't have permission
    ..."), else its last line, else `otherwise`."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    own = [ln for ln in lines if ln.startswith("tcpdump:")]
    return (own or lines or [otherwise])[-1]
