"""`capture:` of a scenario: the run records its target's client queries (dnstap) into a
capture file in its own directory, which a later run replays (`load.replay.file`).

docs/replay.md ("A run that captures its own target") explains each field to users;
soak.runs.capture does the recording.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from soak.units import DurationS, StrictModel

# About 250 bytes of memory a query while it is recorded: 500,000 is some 120 MB.
DEFAULT_MAX_QUERIES = 500_000


class CaptureConfig(StrictModel):
    # dnstap: soak listens on a Frame Streams socket that the target's configuration
    # writes its client queries to (unbound: dnstap-socket-path, BIND: dnstap-output).
    source: Literal["dnstap"] = "dnstap"
    # Where soak listens; `{run_dir}` is the run's directory. None: the run directory's
    # socket (runs.layout), which the target's config names as `{run_dir}/dnstap.sock`.
    socket: str | None = None
    # The span recorded, from the run's origin (its first phase); None: the whole run.
    duration_s: DurationS | None = Field(default=None, gt=0)
    max_queries: int = Field(default=DEFAULT_MAX_QUERIES, ge=1)
    clients_by_port: bool = False  # a client is an address and a port (load on loopback)
    # No data frame for this long is a `capture_quiet` event (the writer went silent).
    quiet_s: DurationS = Field(default=30.0, gt=0)
