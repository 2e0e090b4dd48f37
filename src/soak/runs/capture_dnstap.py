"""A run that records its own target's client queries (`capture:`, docs/replay.md).

The run listens on a dnstap socket before its target starts (the target's config writes
there and connects at its start), keeps the client queries timed from the run's origin
for `capture.duration_s` (else to the run's end), and writes them as a soak capture into
the run's directory (runs.layout.capture_path), where a later run's `load.replay.file`
finds it. What the writer does is told as the run's events: connected, gone (with or
without closing its stream), quiet for `capture.quiet_s`, the capture full, and what was
written. Whatever was recorded is written, at the span's end or the run's, whatever
the writer did.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from soak.clock import ns_to_s, s_to_ns
from soak.config import Scenario
from soak.errors import InputError
from soak.placeholders import Placeholders, render
from soak.points import Fault
from soak.runs.layout import DataDir, capture_path, dnstap_socket
from soak.traffic.capture_config import CaptureConfig
from soak.traffic.capture_file import Builder, read_capture, summary, write_capture
from soak.traffic.dnstap import Listener

# A frame reaches the socket a little after its query (the server's dnstap thread
# batches): the span's file is written this long after the span's end.
SETTLE_S = 2.0
# At the run's end, after the target stopped: how long its writer may take to close.
DRAIN_S = 5.0
# A server hands its queued frames to its writer in batches: unbound wakes its dnstap
# thread after 32 messages or 1 s (dnstap/dtstream.c), and drops what is still queued
# when it stops. So before the target stops, the capture waits for this long without a
# frame (at most FLUSH_MAX_S), once the load has stopped.
FLUSH_QUIET_S = 1.5
FLUSH_MAX_S = 5.0
POLL_S = 0.05


def socket_path(cfg: CaptureConfig, run_dir: Path, host: str, base_dir: Path) -> Path:
    """Where the run listens: `capture.socket` with `{run_dir}` filled (relative: to the
    scenario), else the run directory's socket. Resolved as a target's `{run_dir}` is, so
    that both name one file."""
    run_dir = run_dir.resolve()
    if cfg.socket is None:
        return dnstap_socket(run_dir)
    values = Placeholders(run_dir=str(run_dir), host=host, base_dir=base_dir)
    path = Path(render(cfg.socket, values, "capture.socket"))
    return path if path.is_absolute() else base_dir / path


class _Recording(Builder):
    """The Builder the listener's thread adds to while the run's thread may write it."""

    def __init__(self, source: str, by_port: bool, max_queries: int) -> None:
        super().__init__(source, by_port, max_queries)
        self.lock = threading.Lock()

    def add(
        self, time_ns: int, client: str, conn_key: object, transport: int, message: bytes
    ) -> None:
        with self.lock:
            super().add(time_ns, client, conn_key, transport, message)


class RunCapture:
    """One run's recording: opened before its target starts, begun at its origin, checked
    every tick, finished once its target has stopped."""

    def __init__(self, cfg: CaptureConfig, socket: Path, run_dir: Path) -> None:
        self.cfg = cfg
        self.socket = socket
        self.out = capture_path(run_dir)
        self.recording = _Recording(f"dnstap:{socket}", cfg.clients_by_port, cfg.max_queries)
        self.listener: Listener | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: str | None = None
        self.origin_ns: int | None = None
        self.written: dict[str, Any] | None = None  # what the file holds, once written
        # What has been told (the listener's counters as last seen).
        self._seen = {"connected": 0, "stopped": 0, "lost": 0}
        self._quiet_told = False
        self._full_told = False
        self._begun_mono_ns = 0

    # ---------------------------------------------------------------- life

    def open(self) -> None:
        """The socket bound and read, before the target starts (InputError if it cannot
        be bound: a path too long, a directory that does not exist)."""
        parent = self.socket.parent
        if not parent.exists():
            parent.mkdir(parents=True)
            # A server in a container runs as its own user and reaches the socket through
            # a bind mount of this directory: others may pass through it (not list it).
            parent.chmod(0o711)
        try:
            self.listener = Listener(self.socket)
        except InputError as exc:
            raise InputError(f"capture: {exc} (capture.socket, or a shorter --data-dir)") from None
        self._thread = threading.Thread(target=self._listen, name="capture", daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        assert self.listener is not None
        try:
            # Bounded by the stop request; a week is only the loop's own bound.
            self.listener.record(7 * 86400.0, self.recording, self._stop.is_set)
        except Exception as exc:  # told by check(); what was kept is still written
            self._error = f"{type(exc).__name__}: {exc}"

    def begin(self, origin_ns: int) -> None:
        """The run's origin: queries from it on are kept, for `duration_s` if set."""
        self.origin_ns = origin_ns
        self._begun_mono_ns = time.monotonic_ns() + (origin_ns - time.time_ns())
        if self.cfg.duration_s is not None:
            with self.recording.lock:
                self.recording.until_ns = origin_ns + s_to_ns(self.cfg.duration_s)

    def check(self, now_ns: int) -> list[Fault]:
        """The writer's comings and goings, a quiet socket, a full capture, and the span's
        file once the span is over, as the run's events."""
        if self.listener is None or self.written is not None:
            return []
        faults = self._writer_faults()
        faults += self._quiet_faults()
        if self.recording.over_max and not self._full_told:
            self._full_told = True
            message = (
                f"capture: {self.cfg.max_queries:,} queries kept (capture.max_queries);"
                " later queries are counted, not kept"
            )
            faults.append(Fault("capture_full", message, float(self.cfg.max_queries)))
        if self._error is not None:
            message = f"capture: the listener stopped: {self._error}"
            faults.append(Fault("capture_failed", message, 0.0))
            self._error = None
        until_ns = self.recording.until_ns
        if until_ns is not None and now_ns >= until_ns + s_to_ns(SETTLE_S):
            faults += self._write()
        return faults

    def flush(self) -> None:
        """Once the load has stopped, before the target stops: its queued frames in
        (FLUSH_QUIET_S without a frame, or FLUSH_MAX_S)."""
        if self.listener is None or self.written is not None:
            return
        deadline_ns = time.monotonic_ns() + s_to_ns(FLUSH_MAX_S)
        quiet_ns = s_to_ns(FLUSH_QUIET_S)
        while (now_ns := time.monotonic_ns()) < deadline_ns:
            if now_ns - self.listener.last_frame_mono_ns >= quiet_ns:
                return
            time.sleep(POLL_S)

    def finish(self, drain_s: float = DRAIN_S) -> list[Fault]:
        """After the target stopped: its writer's last frames read (for up to `drain_s`),
        the socket closed, the capture written (unless the span's file already was)."""
        if self.listener is None:
            return []
        deadline = time.monotonic() + drain_s
        while self.listener.open_connections and time.monotonic() < deadline:
            time.sleep(POLL_S)  # the stopped target's writer closing its stream
        faults = [] if self.written is not None else self._writer_faults()
        self.close()
        if self.written is None:
            faults += self._write()
        return faults

    def close(self) -> None:
        """The listener stopped and its socket removed; nothing written."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(DRAIN_S)
        if self.listener is not None:
            self.listener.close()

    # ---------------------------------------------------------------- what is told

    def _writer_faults(self) -> list[Fault]:
        assert self.listener is not None
        faults = []
        kept = float(len(self.recording))
        for key, kind, said in (
            ("connected", "capture_connected", "the target's dnstap writer connected"),
            ("stopped", "capture_writer_stopped", "the target's dnstap writer closed its stream"),
            (
                "lost",
                "capture_writer_lost",
                "the target's dnstap writer went away without closing its stream",
            ),
        ):
            now = getattr(self.listener, key)
            if now > self._seen[key]:
                self._seen[key] = now
                message = f"capture: {said} ({now} so far; {kept:,.0f} queries kept)"
                faults.append(Fault(kind, message, kept))
        return faults

    def _quiet_faults(self) -> list[Fault]:
        """No data frame for `quiet_s` (since the origin, or the last frame): once per
        quiet spell, and once when frames come again."""
        assert self.listener is not None
        if self.origin_ns is None:
            return []
        last_ns = max(self.listener.last_frame_mono_ns, self._begun_mono_ns)
        quiet_ns = time.monotonic_ns() - last_ns
        if quiet_ns >= s_to_ns(self.cfg.quiet_s) and not self._quiet_told:
            self._quiet_told = True
            who = "no writer connected" if not self.listener.connected else "no frame"
            message = (
                f"capture: {who} on {self.socket} for {ns_to_s(quiet_ns):.0f} s"
                f" (capture.quiet_s); {len(self.recording):,} queries kept"
            )
            return [Fault("capture_quiet", message, ns_to_s(quiet_ns))]
        if quiet_ns < s_to_ns(self.cfg.quiet_s) and self._quiet_told:
            self._quiet_told = False
            return [Fault("capture_resumed", "capture: dnstap frames again", 0.0)]
        return []

    def _write(self) -> list[Fault]:
        """The capture file from what was kept since the origin; its figures as an event
        (and in `written`, for the run's result)."""
        with self.recording.lock:
            self.written, faults = write_kept(
                self.recording, self.origin_ns or 0, self.out, str(self.socket)
            )
            if self.origin_ns is not None:  # what the server wrote: a witness of the load
                self.written["counted"] = counted(self.recording, self.origin_ns)
            self.recording.until_ns = 0  # anything later is counted, not kept
        return faults


def write_kept(
    recording: Builder, origin_ns: int, out: Path, where: str, more_notes: str = ""
) -> tuple[dict[str, Any], list[Fault]]:
    """What a recording kept from `origin_ns` on, written to `out`: what the file holds
    (for the run's result) and the event that says so, with what was not kept."""
    before = recording.drop_before(origin_ns)
    notes = _notes(recording, before, more_notes)
    if not len(recording):
        message = f"capture: no client query recorded on {where}; no file written{notes}"
        return {"queries": 0}, [Fault("capture_empty", message, 0.0)]
    capture = recording.capture()
    try:
        write_capture(out, capture)
    except OSError as exc:
        message = f"capture: writing {out}: {exc}"
        return {"queries": 0, "error": str(exc)}, [Fault("capture_failed", message, 0.0)]
    info = summary(capture)
    qtypes = info["qtypes"]
    assert isinstance(qtypes, dict)
    mix = ", ".join(f"{k} {v:,}" for k, v in qtypes.items())
    message = (
        f"capture: {info['queries']:,} queries from {info['clients']:,} clients over"
        f" {info['duration_s']} s ({mix}) written to {out}{notes}"
    )
    written = {"file": str(out), **info}
    return written, [Fault("capture_written", message, float(len(capture.queries)))]


def counted(recording: Builder, origin_ns: int) -> dict[str, int]:
    """The client queries the server wrote as dnstap in the capture's span, [from_ns,
    until_ns): kept and over capture.max_queries alike (once written: those before the
    origin dropped); the audit's witness of the load's sent
    (soak.report.witnesses.capture_disagreements)."""
    until_ns = recording.until_ns or time.time_ns()  # no span: to the run's end
    return {
        "client_queries": len(recording) + recording.over_max,
        "from_ns": origin_ns,
        "until_ns": until_ns,
    }


def written_capture(run_dir: Path) -> dict[str, Any] | None:
    """What a run's capture file holds (as `RunCapture.written`), None without one."""
    path = capture_path(run_dir)
    if not path.is_file():
        return None
    return {"file": str(path), **summary(read_capture(path))}


def _notes(recording: Builder, before: int, more: str = "") -> str:
    """What was seen but not kept, said with the figures (nothing dropped silently)."""
    parts = [
        more,
        f"{before:,} before the run's origin" if before else "",
        f"{recording.after_end:,} after the capture's span" if recording.after_end else "",
        f"{recording.over_max:,} over capture.max_queries" if recording.over_max else "",
        f"{recording.skipped:,} not client queries" if recording.skipped else "",
    ]
    said = "; ".join(p for p in parts if p)
    return f"; not kept: {said}" if said else ""


def resolve_from_run(scenario: Scenario, data_dir: DataDir) -> Scenario:
    """`load.replay.from_run: ID`: the capture that run recorded of its target, in this
    data directory, as `load.replay.file` (InputError, one line, if it has none). The
    run keeps the path, so its record and report name the file it replayed."""
    load = scenario.load
    if load is None or load.replay is None or load.replay.from_run is None:
        return scenario
    run_id = load.replay.from_run
    run_dir = data_dir.run_dir(run_id)
    path = capture_path(run_dir)
    if not path.is_file():
        why = (
            "has no capture: its scenario has no `capture:`, it recorded no query, or it"
            " has not written it yet (at its capture.duration_s, else at its end)"
            if run_dir.is_dir()
            else f"no such run in {data_dir.root}"
        )
        raise InputError(f"load.replay.from_run: {run_id}: {why}")
    replay = load.replay.model_copy(update={"file": path, "from_run": None})
    copy = scenario.model_copy(update={"load": load.model_copy(update={"replay": replay})})
    copy._base_dir = scenario.base_dir
    return copy
