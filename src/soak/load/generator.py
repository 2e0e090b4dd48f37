"""LoadRunner: worker processes that carry the load, and their merged stats.

The soak service drives one LoadRunner through a run's phases (start,
set_rate, take_window every tick, stop); `soak load` uses run_load
(soak.load.oneshot). Workers are spawned (soak.load.spawn; not forked: the
service has threads) and each carries rate / workers (segments.rate_share_qps).
They send one Interval a second through a pipe; a reader thread here folds them
into the current window and into the run's totals.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Sequence
from functools import partial
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from soak.clock import ns_to_s, s_to_ns, second_end_ns, second_start_ns
from soak.errors import InputError, SoakError
from soak.histogram import LatencyHistogram
from soak.load.ledger import Merger, Window, skipped_window
from soak.load.load_config import LoadConfig
from soak.load.queries import build_classes, mix_schedule
from soak.load.segments import rate_share_qps
from soak.load.spawn import policy_of, spawn_worker, tls_spec
from soak.load.stats import Interval, LoadResult, MixStats, result_from
from soak.load.worker import Pacer, WorkerSpec, worker_phase
from soak.netsafety import check_allowed

JOIN_GRACE_S = 5.0


class LoadRunner:
    def __init__(
        self,
        cfg: LoadConfig,
        server: tuple[str, int],
        *,
        base_dir: Path,
        allow_targets: Sequence[str] = (),
        track_gaps: bool = False,
        phase: float = 0.0,
    ) -> None:
        """`phase` (0 <= phase < 1): this runner's place among several that carry one
        schedule together (load agent i of n has i / n), as a fraction of one query's
        period of each of its workers: with equal shares their queries interleave, so
        that together they are due exactly rate x seconds."""
        if cfg.engine != "builtin":
            raise InputError("LoadRunner runs the builtin engine; dnsperf runs via `soak load`")
        self.again = partial(  # a runner like this one, its workers not started
            LoadRunner, cfg, server, base_dir=base_dir, allow_targets=allow_targets,
            track_gaps=track_gaps, phase=phase,
        )  # fmt: skip
        host, port = server
        if not 1 <= port <= 65535:
            raise InputError(f"port out of range: {port} (1-65535)")
        self.cfg = cfg
        self.host = check_allowed(host, tuple(allow_targets))
        self.port = port
        self.track_gaps = track_gaps  # run the Python UDP loop (a swap under load)
        self.phase = phase
        seed = cfg.seed if cfg.seed is not None else int(time.time())
        self.classes = build_classes(cfg.mix, base_dir, seed)
        self.names = [c.name for c in self.classes]
        self.weights = [c.weight for c in self.classes]
        self.schedule = mix_schedule(self.weights)
        self.policies = [policy_of(qc.connection) for qc in cfg.mix]
        self.tls = tls_spec(cfg, base_dir)
        self._highest_us = int(cfg.timeout_s * 1e6) + 1000
        self._lock = threading.Lock()
        self._window = MixStats(self.names, self._highest_us)
        # The last window's stats, emptied: windows swap between two MixStats
        # rather than allocate four ~100 KB histograms every tick.
        self._spare: MixStats | None = MixStats(self.names, self._highest_us)
        self._total = MixStats(self.names, self._highest_us)
        self._procs: list[subprocess.Popen[bytes]] = []
        self._conns: list[Connection] = []
        self._ctrls: list[Connection] = []
        self._reader: threading.Thread | None = None
        self._errors: list[str] = []
        self._rate_qps = 0.0
        self._started_at = 0.0
        self._origin_ns = 0
        self._stopped_at: float | None = None
        self._max_duration_s = 0.0
        self._window_at = 0.0
        self._result: LoadResult | None = None
        # The workers' closed windows merged by grid second; every count comes from them.
        self._merger = Merger(len(self.names), range(cfg.workers))
        self.ledger: list[Window] = []  # the closed windows not yet taken by a reader
        self._specs: list[WorkerSpec] = []
        self._finished: set[int] = set()  # workers whose last windows came
        # Workers gone without their last windows (killed): index -> the second from which
        # their part is still to be counted (due, skipped) until sending ends.
        self._gone: dict[int, int] = {}
        self.keep_ledger = False
        self._scratch: MixStats | None = None  # window_parts' sum, reused (held by its lock)
        self._scratch_lock = threading.Lock()
        # The longest silence of any one worker (no reply within the timeout) and when
        # it ended, on the monotonic clock: a swap under load reports it.
        self._max_gap_ns = 0
        self._max_gap_end_ns = 0
        # Load agents ship each window's latency histograms (per class and `all`) to be
        # merged: percentiles of several agents are read from their added histograms.
        self.keep_window_hist = False
        self.last_window_hist: str | None = None
        self.last_window_hists: dict[str, str] = {}
        self.last_window_s = 0.0

    # ------------------------------------------------------------ lifecycle

    def start(
        self,
        rate_qps: float,
        max_duration_s: float,
        begin_at_s: float | None = None,
        send_s: float | None = None,
    ) -> None:
        """Workers started now; they send from begin_at_s (time.monotonic) if given, so
        that the interpreters' start-up does not eat into the first second, for `send_s`
        (the run's remaining seconds: its last window ends with it) or max_duration_s."""
        if rate_qps < 0 or max_duration_s <= 0:
            raise InputError("rate must be >= 0 and max duration > 0")
        if self._procs:
            raise SoakError("LoadRunner.start called twice")
        workers = self.cfg.workers
        specs: list[WorkerSpec] = []
        for index in range(workers):
            spec = WorkerSpec(
                index=index,
                phase=worker_phase(index, workers, self.phase),
                host=self.host,
                port=self.port,
                protocol=self.cfg.protocol,
                flows=self.cfg.flows,
                timeout_s=self.cfg.timeout_s,
                classes=self.classes,
                schedule=self.schedule,
                start_offset=index * 7919,
                max_outstanding=self.cfg.max_outstanding,
                duration_s=min(send_s, max_duration_s) if send_s else max_duration_s,
                max_duration_s=max_duration_s,
                rate_qps=rate_share_qps(rate_qps, workers),
                track_gaps=self.track_gaps,
                policies=self.policies,
                tls=self.tls,
                doh_method=self.cfg.doh.method,
                doh_path=self.cfg.doh.path,
                begin_at_ns=s_to_ns(begin_at_s) if begin_at_s is not None else 0,
            )
            proc, ctrl, stats = spawn_worker()
            specs.append(spec)
            self._specs.append(spec)
            self._procs.append(proc)
            self._ctrls.append(ctrl)
            self._conns.append(stats)
        # Sent once every interpreter is starting: a large spec blocks until it is read.
        for ctrl, spec in zip(self._ctrls, specs, strict=True):
            try:
                ctrl.send(spec)
            except OSError as exc:  # it died while starting: alive() is False from now on
                self._errors.append(f"worker {spec.index} did not start: {exc}")
        now = max(time.monotonic(), begin_at_s or 0.0)
        self._started_at = self._window_at = now
        # the workers' grid origin (a worker started without one takes its own start)
        self._origin_ns = s_to_ns(begin_at_s if begin_at_s is not None else now)
        self._rate_qps = rate_qps
        self._max_duration_s = max_duration_s
        self._reader = threading.Thread(target=self._read, name="load-stats", daemon=True)
        self._reader.start()

    def set_rate(self, rate_qps: float, after_origin_ns: int | None = None) -> None:
        """The new rate, from `after_origin_ns` after the workers' origin (a phase's start
        on the run's grid) if given, else at once. An offset in whole nanoseconds, not a
        clock reading: the phase starts exactly on the grid the workers pace on, so the
        queries due in each phase are exactly its rate x its seconds."""
        if rate_qps < 0:
            raise InputError(f"rate must not be negative: {rate_qps}")
        with self._lock:
            self._rate_qps = rate_qps
        share = rate_share_qps(rate_qps, max(1, len(self._ctrls)))
        if after_origin_ns is None:
            self._send_all(("rate", share))
        else:
            self._send_all(("rate", share, self._origin_ns + after_origin_ns))

    def alive(self) -> bool:
        return bool(self._procs) and not self._errors and all(p.poll() is None for p in self._procs)

    def wait(self, timeout_s: float) -> bool:
        """Until every worker has finished by itself (True) or timeout_s passed."""
        deadline = time.monotonic() + timeout_s
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
        return all(p.poll() is not None for p in self._procs)

    def stop(self) -> LoadResult:
        if self._result is not None:
            return self._result
        if self._stopped_at is None:
            self._stopped_at = time.monotonic()
        self._send_all(("stop",))
        grace_s = self.cfg.timeout_s + JOIN_GRACE_S
        self.wait(grace_s)
        for proc in self._procs:
            if proc.poll() is None:
                self._errors.append(f"worker pid {proc.pid} did not stop; killed")
                proc.kill()
                proc.wait(2.0)
            elif proc.returncode != 0 and not self._errors:
                self._errors.append(f"worker pid {proc.pid} exited with {proc.returncode}")
        for ctrl in self._ctrls:
            ctrl.close()
        if self._reader is not None:
            self._reader.join(grace_s)
        with self._lock:  # the gone workers' part up to the stop (or the schedule's end)
            self._count_gone(final=True)
            self._add_closed()
        self._result = self.totals()
        return self._result

    # ------------------------------------------------------------ stats

    def take_window(self) -> dict[str, dict[str, float]]:
        """The `load` fields of the windows closed since the last call (nothing when none
        closed: a tick's load is the windows that closed for it)."""
        with self._lock:
            if self._window.seconds == 0:
                self.last_window_s = 0.0
                self.last_window_hist, self.last_window_hists = None, {}
                return {}
            spare, self._spare = self._spare, None
            if spare is None:  # another take_window holds it
                spare = MixStats(self.names, self._highest_us)
            window, self._window = self._window, spare
        fields: dict[str, dict[str, float]] = window.fields()
        self.last_window_s = float(window.seconds)
        if self.keep_window_hist:
            self.last_window_hists = window.encoded_hists()
            self.last_window_hist = self.last_window_hists.get("all", "")
        window.reset()
        with self._lock:
            self._spare = window
        return fields

    def totals(self, *, stddev: bool = True) -> LoadResult:
        """The sums of the closed windows so far (all of them once stopped)."""
        with self._lock:
            seconds = float(self._total.seconds)
            result = result_from(self._total, "builtin", seconds, self._rate_qps, stddev=stddev)
        result.notes.extend(self._errors)
        return result

    def window_fields(self, *windows: Window) -> dict[str, dict[str, float]]:
        """Closed windows' `load` fields together (usually one), per class and `all` (their
        rates over their seconds)."""
        return self.window_parts(*windows)[0]

    def window_parts(self, *windows: Window) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
        """Closed windows' `load` fields and latency histograms (per class and `all`,
        encoded: the `lat_hist` fields), read together from one sum of the windows. The
        scratch sum is shared, so it is held while both are read: a sampler running late
        beside the run's last take must never pair one window's counts with another's
        histograms (a stored `all` that is not the merge of its classes)."""
        with self._scratch_lock:
            scratch = self._scratch
            if scratch is None:
                scratch = self._scratch = MixStats(self.names, self._highest_us)
            scratch.reset()
            for window in windows:
                scratch.add_window(window)
            fields: dict[str, dict[str, float]] = scratch.fields()
            return fields, scratch.encoded_hists()

    def take_ledger(self) -> list[Window]:
        """The closed windows since the last call (kept only with keep_ledger)."""
        with self._lock:
            out, self.ledger = self.ledger, []
        return out

    def latency_histogram(self) -> LatencyHistogram:
        """A copy of the run's latency histogram so far (all classes, µs)."""
        with self._lock:
            return LatencyHistogram.decode(self._total.all.hist.encode())

    def longest_gap(self) -> tuple[float, float]:
        """(seconds, monotonic end time in s) of the longest silence of one worker.

        Every loop measures it (`track_gaps` only picks the Python UDP loop). With one
        worker that is the longest time without any answer; with several it is an
        upper bound (another worker may have had answers meanwhile)."""
        with self._lock:
            return ns_to_s(self._max_gap_ns), ns_to_s(self._max_gap_end_ns)

    @property
    def pids(self) -> list[int]:
        """The worker processes' PIDs (their CPU is the generator's)."""
        return [p.pid for p in self._procs]

    @property
    def errors(self) -> list[str]:
        return list(self._errors)

    def _send_all(self, msg: tuple[Any, ...]) -> None:
        for ctrl in self._ctrls:
            try:
                ctrl.send(msg)
            except OSError:  # that worker has gone; alive() and stop() report it
                continue

    def _read(self) -> None:
        conns = list(self._conns)
        while conns:
            for conn in wait(conns, timeout=0.5):
                assert isinstance(conn, Connection)
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    conns.remove(conn)
                    index = self._conns.index(conn)
                    with self._lock:
                        if index in self._finished:  # it ended: it holds no second back
                            self._merger.end(index)
                        else:  # killed: its open windows are counted from here on
                            self._gone[index] = self._merger.below_of(index)
                        self._add_closed()
                    continue
                if isinstance(msg, Interval):
                    with self._lock:
                        self._merger.add(msg.worker, msg.windows, msg.closed_below)
                        if msg.final:
                            self._merger.end(msg.worker)
                            self._finished.add(msg.worker)
                        self._add_closed()
                        self._window.add(msg)
                        self._total.add(msg)
                        if msg.max_gap_ns > self._max_gap_ns:
                            self._max_gap_ns, self._max_gap_end_ns = (
                                msg.max_gap_ns,
                                msg.max_gap_end_ns,
                            )
                else:
                    self._errors.append(str(msg[1]))
            if self._gone:
                with self._lock:
                    self._count_gone(final=False)
                    self._add_closed()

    def _count_gone(self, *, final: bool) -> None:
        """A worker gone without its last windows (SIGKILLed, crashed): the seconds it had
        not closed are closed for it and kept, each with its part of the schedule due and
        skipped (what it sent in them is gone with it: no answer of it can be counted),
        from the second it had closed below up to the end of sending (the stop, or the
        schedule's end). While the run goes on, whole seconds as they pass; `final` (the
        runner stopped), up to the end of sending. Never dropped, never counted twice."""
        origin_ns = self._origin_ns
        now_ns = time.monotonic_ns() if not final else 1 << 62
        for index, second in list(self._gone.items()):
            spec = self._specs[index]
            end_ns = origin_ns + s_to_ns(spec.duration_s)
            if self._stopped_at is not None:
                end_ns = min(end_ns, s_to_ns(self._stopped_at))
            share = rate_share_qps(self._rate_qps, len(self._specs))
            pacer = Pacer(share, origin_ns, spec.phase) if share > 0 else None
            windows = []
            while (lo_ns := second_start_ns(origin_ns, second)) < end_ns:
                hi_ns = min(second_end_ns(origin_ns, second), end_ns)
                if hi_ns > now_ns:
                    break
                n = 0
                if pacer is not None:
                    n = max(0, pacer.due(hi_ns - 1)) - max(0, pacer.due(lo_ns - 1))
                windows.append(skipped_window(second, self.schedule, n, len(self.names)))
                second += 1
            self._merger.add(index, windows, second)
            self._gone[index] = second
            if lo_ns >= end_ns:
                self._merger.end(index)
                del self._gone[index]

    def _add_closed(self) -> None:
        """The seconds every worker has closed, into the tick's stats and the totals."""
        for window in self._merger.take_closed():
            self._window.add_window(window)
            self._total.add_window(window)
            if self.keep_ledger:
                self.ledger.append(window)
