"""The `pprof` sampler: a Go target's heap and goroutine profiles, kept in the run's directory.

At its first tick and every `interval_s` after (and at the first tick after
the warm-up, and at the next tick after `request_capture()`), it fetches
`<path>/heap?debug=1` and `<path>/goroutine?debug=1`, checks that each parses
(soak.pproftext), stores it gzipped (soak.profiles) and thins the old ones to
the caps, in a thread of its own so that a slow target (a forced GC on a big
heap) does not hold up the tick; its points come with the next tick, stamped
with the capture's own tick time. Each capture is one `event` point of kind
`profile` (the index: the files and their sizes). An endpoint that answers
401, 404, garbage or nothing is one `pprof_failed` event, not one per capture;
the soak goes on, and a later success is a `pprof_recovered` event.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import httpx

from soak.clock import s_to_ns
from soak.points import Point, event_point
from soak.pproftext import parse_profile
from soak.probes import http_request
from soak.profiles import thin, write_profile
from soak.samplers.api import call_headers
from soak.samplers.base import TargetFn, TargetSectionSampler
from soak.samplers.selection import HttpCallConfig, PprofSamplerConfig
from soak.targets.base import Running


class PprofSampler(TargetSectionSampler[PprofSamplerConfig]):
    name = "pprof"

    def __init__(
        self,
        cfg: PprofSamplerConfig,
        target: TargetFn,
        *,
        client: httpx.Client | None = None,
        environ: dict[str, str] | None = None,
        warmup_end_ns: Callable[[], int] | None = None,
        background: bool = True,
        base_dir: Path | None = None,
        profiles_dir: Path | None = None,
    ) -> None:
        """`profiles_dir`: where the captures are kept (the run's data directory names it);
        without one, every capture fails, said as the run's event."""
        super().__init__(cfg, target)
        self.profiles_dir = profiles_dir
        self.client = client
        auth = HttpCallConfig(
            endpoint="pprof",
            path=cfg.path,
            headers=cfg.headers,
            token_env=cfg.token_env,
            token_header=cfg.token_header,
        )
        environ = dict(os.environ) if environ is None else environ
        self.headers = call_headers(auth, environ, base_dir)
        self.warmup_end_ns = warmup_end_ns
        self.last_capture_ns: int | None = None
        self.warmup_captured = False
        self.failing = False
        self.failures = 0
        self.captures = 0
        self._requested: str | None = None
        self._lock = threading.Lock()
        self.background = background
        self._worker: threading.Thread | None = None
        self._done: list[Point] = []  # points of captures finished in the background

    def request_capture(self, reason: str) -> None:
        """A capture at the next tick, whatever the interval (a verdict turned growing, the
        end of the run); reason is a lower-case word for the file name."""
        with self._lock:
            self._requested = reason

    def _reason(self, tick_time_ns: int) -> str | None:
        with self._lock:
            requested, self._requested = self._requested, None
        if requested is not None:
            return requested
        warmup_end_ns = self.warmup_end_ns() if self.warmup_end_ns is not None else 0
        if not self.warmup_captured and tick_time_ns >= warmup_end_ns > 0:
            self.warmup_captured = True
            return "warmup_end"
        if self.last_capture_ns is None:
            return "first"
        if tick_time_ns - self.last_capture_ns >= s_to_ns(self.cfg.interval_s):
            return "interval"
        return None

    def sample(self, tick_time_ns: int) -> list[Point]:
        """Starts a capture when one is due and returns the points of captures that have
        finished (stamped with their own tick's time). In the background (the default)
        a capture, a forced GC and two fetches, never holds up the tick."""
        points = self._collect()
        running = self.target()
        if running is None or (self._worker is not None and self._worker.is_alive()):
            return points  # not running; or the last capture is still going: not two at once
        reason = self._reason(tick_time_ns)
        if reason is None:
            return points
        self.last_capture_ns = tick_time_ns
        if not self.background:
            return points + self._capture(running, tick_time_ns, reason)
        self._worker = threading.Thread(
            target=self._capture_into_done,
            args=(running, tick_time_ns, reason),
            name="pprof-capture",
            daemon=True,
        )
        self._worker.start()
        return points

    def wait(self, timeout_s: float | None = None) -> list[Point]:
        """Waits for a capture in the background; its points (tests, the run's end)."""
        if self._worker is not None:
            self._worker.join(timeout_s)
        return self._collect()

    def _collect(self) -> list[Point]:
        with self._lock:
            done, self._done = self._done, []
        return done

    def _capture_into_done(self, running: Running, tick_time_ns: int, reason: str) -> None:
        try:
            points = self._capture(running, tick_time_ns, reason)
        except Exception as exc:  # a full disk: recorded, as a sampler error would be
            points = self._failed(f"{type(exc).__name__}: {exc}", tick_time_ns)
        with self._lock:
            self._done += points

    def _capture(self, running: Running, tick_time_ns: int, reason: str) -> list[Point]:
        folder = self.profiles_dir
        if folder is None:
            return self._failed("the run has no directory to keep profiles in", tick_time_ns)
        if self.cfg.port not in running.ports:
            return self._failed(f"the target has no port named {self.cfg.port!r}", tick_time_ns)
        fetched: dict[str, bytes] = {}
        for kind in self.cfg.profiles:
            body, error = self._fetch(running, kind)
            if error is not None:
                return self._failed(error, tick_time_ns)
            fetched[kind] = body
        parts = []
        for name, body in fetched.items():
            path = write_profile(folder, tick_time_ns, reason, name, body)
            parts.append(f"{name} {path.name} {path.stat().st_size} B")
        thin(folder, self.cfg.max_captures, self.cfg.max_bytes)
        self.captures += 1
        points = []
        if self.failing:
            self.failing = False
            message = f"pprof answers again after {self.failures} failed capture(s)"
            points.append(event_point("pprof_recovered", message, tick_time_ns, self.failures))
        message = f"pprof {reason}: " + ", ".join(parts)
        points.append(event_point("profile", message, tick_time_ns, self.captures))
        return points

    def _fetch(self, running: Running, kind: str) -> tuple[bytes, str | None]:
        host, port = running.address(self.cfg.port)
        host = f"[{host}]" if ":" in host else host
        url = f"http://{host}:{port}{self.cfg.path.rstrip('/')}/{kind}?debug=1"
        if kind == "heap" and self.cfg.force_gc:
            url += "&gc=1"
        result = http_request(
            "GET", url, headers=self.headers, timeout_s=self.cfg.timeout_s, client=self.client
        )
        if result.status != 200:
            return b"", f"GET {url}: {result.error or f'HTTP {result.status}'}"
        try:
            parsed = parse_profile(result.body.decode("utf-8", errors="replace"))
        except ValueError as exc:
            return b"", f"GET {url}: {exc}"
        if parsed.kind != kind:
            return b"", f"GET {url}: a {parsed.kind} profile, not {kind}"
        return result.body, None

    def _failed(self, message: str, tick_time_ns: int) -> list[Point]:
        self.failures += 1
        if self.failing:
            return []  # told once; the soak goes on without profiles
        self.failing = True
        return [event_point("pprof_failed", message, tick_time_ns, self.failures)]
