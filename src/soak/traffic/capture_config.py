"""`capture:` of a scenario: the run records its target's client queries (dnstap) into a
capture file in its own directory, which a later run replays (`load.replay.file`).

docs/replay.md ("A run that captures its own target") explains each field to users;
soak.runs.capture_dnstap does the recording.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from soak.units import DurationS, StrictModel

# About 250 bytes of memory a query while it is recorded: 500,000 is some 120 MB.
DEFAULT_MAX_QUERIES = 500_000


class CaptureConfig(StrictModel):
    # dnstap: soak listens on a Frame Streams socket that the target's configuration
    # writes its client queries to (unbound: dnstap-socket-path, BIND: dnstap-output).
    # pcap: tcpdump records what goes to the load's server address (soak.runs.capture_pcap),
    # for a server that writes no dnstap; it needs CAP_NET_RAW.
    source: Literal["dnstap", "pcap"] = "dnstap"
    # dnstap: where soak listens; `{run_dir}` is the run's directory. None: the run
    # directory's socket (runs.layout), which the target's config names as
    # `{run_dir}/dnstap.sock`.
    socket: str | None = None
    interface: str = "lo"  # pcap: where tcpdump listens (the load's traffic to the target)
    # The span recorded, from the run's origin (its first phase); None: the whole run.
    duration_s: DurationS | None = Field(default=None, gt=0)
    max_queries: int = Field(default=DEFAULT_MAX_QUERIES, ge=1)
    clients_by_port: bool = False  # a client is an address and a port (load on loopback)
    # No data frame for this long is a `capture_quiet` event (the writer went silent).
    quiet_s: DurationS = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _one_source(self) -> CaptureConfig:
        if self.source == "pcap" and self.socket is not None:
            raise ValueError("capture.socket is dnstap's; a pcap capture listens on `interface`")
        return self
