"""`soak agent`: one load agent runs its segment of a load config and reports per second.

An agent is given the whole run's load config (a scenario's `load:` section, or
its JSON in SOAK_AGENT_LOAD as the engines pass it) and its segment `i/N`; it
takes its share (soak.load.segments), runs it with the ordinary worker
processes (LoadRunner) for the duration and stops by itself. Every second it
writes the `load` points of the window, tagged `agent`, to its sink: JSON lines
on stdout or in a file (the coordinator reads them back through the engine's
logs), or an InfluxDB 1.x `/write` URL. JSON lines also carry each window's
latency histogram. Its last line on stdout is always its totals with the run's
histogram (`{"kind": "totals", ...}`): that is what the coordinator merges.

Alone (`soak agent --segment`), an agent runs for its duration and ends. Under a
run's coordinator (`soak agent --coordinator`) soak.load.fleet.member registers it,
starts it at the run's start_at and holds its lease: an agent that loses the
service stops by itself.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from pydantic import ValidationError

from soak.clock import second_end_ns
from soak.errors import InputError, SoakError
from soak.load.fleet.merge import AgentTotals
from soak.load.generator import JOIN_GRACE_S, LoadRunner
from soak.load.load_config import LoadConfig
from soak.load.segments import Segment, segment_config
from soak.points import Point, point_to_json
from soak.sinks.base import Sink

LOAD_ENV = "SOAK_AGENT_LOAD"  # the whole run's load config as JSON
TICK_S = 1.0


class JsonLinesSink:
    """Points as JSON lines (`{"kind": "point", ...}`) on a stream, flushed every write."""

    def __init__(self, stream: IO[str], name: str = "jsonl") -> None:
        self.name = name
        self._stream = stream

    def write(self, points: Sequence[Point]) -> None:
        for p in points:
            self.write_line({"kind": "point", **point_to_json(p)})

    def write_line(self, data: dict[str, Any]) -> None:
        self._stream.write(json.dumps(data, separators=(",", ":")) + "\n")
        self._stream.flush()

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        if self._stream is not sys.stdout:
            self._stream.close()


def open_sink(target: str) -> Sink:
    """`-` (stdout), a file path (JSON lines), or http(s)://HOST:PORT/?db=NAME (InfluxDB 1.x)."""
    if target == "-":
        return JsonLinesSink(sys.stdout, "stdout")
    if target.startswith(("http://", "https://")):
        from soak.sinks.destinations import InfluxV1SinkConfig
        from soak.sinks.influx import InfluxV1Sink

        parts = urlsplit(target)
        db = parse_qs(parts.query).get("db", [""])[0]
        if not db:
            raise InputError(f"--sink {target}: an InfluxDB URL needs ?db=NAME")
        base = urlunsplit((parts.scheme, parts.netloc, parts.path.removesuffix("/write"), "", ""))
        return InfluxV1Sink(InfluxV1SinkConfig(kind="influx_v1", url=base, db=db))
    try:
        return JsonLinesSink(Path(target).open("a", encoding="utf-8"), target)
    except OSError as exc:
        raise InputError(f"--sink {target}: {exc.strerror}") from None


def window_points(
    fields_by_class: dict[str, dict[str, float]], time_ns: int, tags: dict[str, str]
) -> list[Point]:
    return [
        Point("load", dict(fields), time_ns, {**tags, "class": name})
        for name, fields in fields_by_class.items()
    ]


def load_config_json(load_json: str | None) -> LoadConfig:
    """The whole run's config as the engine passed it (JSON in SOAK_AGENT_LOAD)."""
    if not load_json:
        raise InputError(f"give --scenario FILE or the load config as JSON in {LOAD_ENV}")
    try:
        return LoadConfig.model_validate_json(load_json)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InputError(f"{LOAD_ENV}: {where}: {err['msg']}") from None


def parse_segment(text: str, environ: dict[str, str]) -> Segment:
    """`i/N`, where i may be `$NAME`: read from the environment (JOB_COMPLETION_INDEX)."""
    index, sep, count = text.partition("/")
    if sep and index.startswith("$"):
        value = environ.get(index[1:])
        if value is None:
            raise InputError(f"--segment {text}: {index[1:]} is not set")
        text = f"{value}/{count}"
    return Segment.parse(text)


def run_agent(
    cfg: LoadConfig,
    segment: Segment,
    server: tuple[str, int],
    duration_s: float,
    sink: Sink,
    out: JsonLinesSink,
    *,
    base_dir: Path,
    tags: dict[str, str],
    allow_targets: Sequence[str] = (),
) -> AgentTotals:
    """Run the segment for duration_s, a window of points every second; the totals."""
    if cfg.seed is None:
        raise InputError(
            "the load config needs a seed (or --seed): every agent derives its own from it"
        )
    mine = segment_config(cfg, segment, cfg.seed)
    tags = {**tags, "agent": str(segment.index)}
    runner = LoadRunner(mine, server, base_dir=base_dir, allow_targets=allow_targets)
    runner.keep_window_hist = True
    runner.start(mine.rate_qps, duration_s)
    started_wall_ns, started = time.time_ns(), time.monotonic()
    end = started + duration_s + mine.timeout_s + JOIN_GRACE_S + 10.0
    tick = 1
    try:
        while True:
            finished = runner.wait(max(0.0, started + tick * TICK_S - time.monotonic()))
            if time.monotonic() > end:
                break
            _emit_window(runner, sink, out, second_end_ns(started_wall_ns, tick - 1), tags)
            tick += 1
            if finished:
                break
    finally:
        result = runner.stop()
    _emit_window(runner, sink, out, second_end_ns(started_wall_ns, tick - 1), tags)
    sink.flush()
    if runner.errors:
        raise SoakError(f"agent {segment}: " + "; ".join(runner.errors))
    return AgentTotals.from_result(
        segment.index,
        result,
        runner.latency_histogram(),
        rate_target_qps=mine.rate_qps,
        duration_s=duration_s,
    )


def _emit_window(
    runner: LoadRunner, sink: Sink, out: JsonLinesSink, time_ns: int, tags: dict[str, str]
) -> None:
    points = window_points(runner.take_window(), time_ns, tags)
    try:
        sink.write(points)
    except SoakError as exc:  # counted in the totals line; never silent
        out.write_line({"kind": "sink_error", "time_ns": time_ns, "message": str(exc)})
    out.write_line(
        {"kind": "window_hist", "time_ns": time_ns, "tags": tags, "hist": runner.last_window_hist}
    )
