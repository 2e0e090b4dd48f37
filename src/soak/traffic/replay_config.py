"""`load.replay` of a scenario (and `soak load --replay FILE`): what to replay and how.

docs/replay.md explains each field to users; soak.load.replay's plan turns them into
send times and names, its loop sends them. BOUND_P99_US is the timing a replay is held to:
the loop says "generator-bound" past it, and so does the run's criterion
(soak.analysis.criteria), which reads it here rather than from the replay.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import dns.exception
import dns.name
from pydantic import Field, field_validator, model_validator

from soak.errors import InputError
from soak.units import DurationS, StrictModel, parse_rate_qps

# Offsets of the send time from the planned one, in µs: p99 beyond this means the
# generator did not keep the capture's timing (said aloud, as generator-bound).
BOUND_P99_US = 10_000


class Rewrite(StrictModel):
    """Fresh names per loop: from loop `from_loop` on (0 is the first), every name is
    replaced by `<label>.<zone>`, the label a seeded hash of (seed, loop, name), the zone
    one of `zones` (by the same hash). One name keeps one new name within a loop (the
    capture's repeats stay repeats, its cache hits hits) and gets another in the next."""

    zones: list[str] = Field(min_length=1)
    from_loop: int = Field(default=1, ge=0)
    label_length: int = Field(default=12, ge=4, le=63)

    @model_validator(mode="after")
    def _names_fit(self) -> Rewrite:
        """Every zone a name, and a new name under it at most 255 bytes: found when the
        scenario is read, not when the replay reaches the loop that rewrites."""
        for zone in self.zones:
            try:
                wire = dns.name.from_text(zone).to_wire() or b"\0"
            except dns.exception.DNSException as exc:
                raise ValueError(f"zone {zone!r}: {exc}") from None
            if 1 + self.label_length + len(wire) > 255:
                raise ValueError(
                    f"zone {zone!r}: too long for a {self.label_length}-byte label"
                    " (a name is at most 255 bytes)"
                )
        return self


class ReplayClass(StrictModel):
    """A ledger class: queries whose type is in `qtypes` and/or whose name matches
    `pattern` (a regular expression over the name as text, trailing dot included)."""

    name: str
    qtypes: list[str] | None = None
    pattern: str | None = None

    @model_validator(mode="after")
    def _something(self) -> ReplayClass:
        if self.qtypes is None and self.pattern is None:
            raise ValueError(f"class {self.name!r}: give qtypes, pattern or both")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"class {self.name!r}: pattern: {exc}") from None
        return self


class ReplayConfig(StrictModel):
    file: Path | None = None  # a soak capture, a pcap/pcapng or a dnstap file
    # Or the capture a soak run recorded of its target (`capture:`), by the run's id:
    # `soak start` and the service find it in their data directory and set `file`
    # (soak.runs.capture_dnstap.resolve_from_run).
    from_run: str | None = None
    # The capture's own transport per query, or one for all (TCP, DoT, DoH, UDP).
    transport: Literal["capture", "udp", "tcp", "dot", "doh"] = "capture"
    speed: float | None = Field(default=None, gt=0)  # 2 or "2x": twice as fast
    rate_qps: float | None = Field(default=None, gt=0)  # the mean rate instead of a speed
    loops: int | None = Field(default=None, ge=1)  # None: as many as the duration holds
    # A client's connection closes after this long without a query (nothing in flight);
    # its next query opens a new one. A capture's new connection opens a new one too.
    idle_timeout_s: DurationS = 10.0
    rename_clients: bool = True  # each loop: new sockets (source ports, connections)
    clients_by_port: bool = False  # pcap/dnstap: a client is an address and a port
    rewrite: Rewrite | None = None
    classes: list[ReplayClass] | None = None  # None: one class per query type
    # A soak run's replay process asks for the real-time class (soak.load.realtime says
    # why); refused, it plays at normal priority and the run records the refusal.
    scheduling: Literal["realtime", "normal"] = "realtime"

    @field_validator("speed", mode="before")
    @classmethod
    def _speed(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip().lower().removesuffix("x")
            try:
                return float(text)
            except ValueError:
                raise ValueError(f"speed {value!r}: want a number such as 2 or 2x") from None
        return value

    @field_validator("rate_qps", mode="before")
    @classmethod
    def _rate(cls, value: Any) -> Any:
        return parse_rate_qps(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_pace(self) -> ReplayConfig:
        if self.speed is not None and self.rate_qps is not None:
            raise ValueError("give speed or rate_qps, not both")
        if self.file is not None and self.from_run is not None:
            raise ValueError("give file or from_run, not both")
        if self.file is None and self.from_run is None:
            raise ValueError("give file (a capture) or from_run (a run that captured)")
        return self

    @property
    def path(self) -> Path:
        """The capture's file; InputError while it is still a run's id (`soak load` and
        `soak validate` do not look into a data directory)."""
        if self.file is None:
            raise InputError(
                f"load.replay.from_run: {self.from_run}: only `soak start` and the service find"
                " a run's capture; give load.replay.file (the path the run printed)"
            )
        return self.file

    def at(self, base_dir: Path) -> ReplayConfig:
        """The config with its file found from `base_dir` (the scenario's directory)."""
        return self.model_copy(update={"file": base_dir / self.path})

    def pace(self) -> str:
        """How fast the capture plays, as a phase names it: "replay at 2x", "replay at
        5000 q/s (mean)", "replay at 1x" (the capture's own timing)."""
        if self.rate_qps is not None:
            return f"replay at {self.rate_qps:g} q/s (mean)"
        return f"replay at {self.speed or 1:g}x"
