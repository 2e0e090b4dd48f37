"""The `load:` section of a scenario; `soak load` builds the same model from its flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_serializer, field_validator, model_validator

from soak.agents.engine_config import AgentsConfig
from soak.traffic.replay_config import ReplayConfig
from soak.units import DurationS, StrictModel, parse_rate_qps


class Expect(StrictModel):
    """What a right answer is for a class; anything else counts as a wrong answer."""

    rcodes: list[str] | None = None  # e.g. [NOERROR]; None: any rcode
    addresses: list[str] | None = None  # e.g. ["0.0.0.0"] for blocked names


class RandomNames(StrictModel):
    """Cache-miss names: `<random label>.<zone>`, fresh every query, seeded."""

    zone: str
    type: str = "A"
    label_length: int = Field(default=12, ge=1, le=63)


class ConnectionPolicy(StrictModel):
    """How a class's TCP, DoT or DoH connections live (DNS Shotgun's client model).

    A connection carries `queries_per_connection` queries (pipelined), waits for
    their answers, stays open idle for `idle_s`, then closes and a new one
    opens; `reconnect_every_s` closes it (once its answers are in) at that age
    whatever it carried. Without either, connections last until the server
    closes them. `hangup_fraction` of the connections do not wait: they hang
    up (TCP RST) right after their last query leaves, answers still due.
    """

    queries_per_connection: int | None = Field(default=None, ge=1)
    idle_s: DurationS = 0.0
    reconnect_every_s: DurationS | None = None
    hangup_fraction: float = Field(default=0.0, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _positive(self) -> ConnectionPolicy:
        if self.reconnect_every_s is not None and self.reconnect_every_s <= 0:
            raise ValueError("reconnect_every_s must be positive")
        if self.hangup_fraction > 0 and (
            self.queries_per_connection is None and self.reconnect_every_s is None
        ):
            raise ValueError(
                "hangup_fraction needs queries_per_connection or reconnect_every_s "
                "(a connection hangs up once it is done)"
            )
        return self


class TlsOptions(StrictModel):
    """DoT and DoH: a load generator does not verify the server unless given a CA."""

    resumption: bool = True  # resume the previous connection's TLS session
    server_name: str | None = None  # SNI (and the name checked with ca_file)
    ca_file: Path | None = None  # verify the server's certificate against this CA


class DohOptions(StrictModel):
    method: Literal["POST", "GET"] = "POST"
    path: str = "/dns-query"


class QueryClass(StrictModel):
    """One named class of a mix (the seed's cached, local, blocked, miss)."""

    name: str
    weight: float = Field(default=1.0, gt=0)
    file: Path | None = None  # dnsperf format: `name TYPE` per line
    queries: list[str] | None = None  # inline, same format as a file's lines
    random: RandomNames | None = None
    expect: Expect | None = None
    connection: ConnectionPolicy | None = None  # TCP, DoT and DoH only

    @model_validator(mode="after")
    def _one_source(self) -> QueryClass:
        given = [s for s in (self.file, self.queries, self.random) if s is not None]
        if len(given) != 1:
            raise ValueError(f"class {self.name!r}: give exactly one of file, queries, random")
        return self


# A scenario (or `--rate`) that means "as fast as max_outstanding allows" says so.
FLAT_OUT = "max"
INPUT_CONTEXT = {"input": True}  # validation of what a user wrote, not a stored copy


def rate_or_max(value: Any, info: ValidationInfo, where: str = "rate_qps") -> Any:
    """`max` is flat out (0 inside); a 0 a user wrote is refused, not taken as flat out.

    Stored copies (the run record, agent specs, segments) are validated without the
    input context and keep 0; their JSON says `max` (`rate_json`)."""
    if isinstance(value, str) and value.strip().lower() == FLAT_OUT:
        return 0.0
    if isinstance(value, str):  # "1k", "2000 q/s": as durations and sizes take units
        value = parse_rate_qps(value)
    if (info.context or {}).get("input") and isinstance(value, int | float) and value == 0:
        raise ValueError(
            f"0 q/s sends nothing; for as fast as the server answers write `{where}: max`"
        )
    return value


def rate_json(value: float | None) -> float | str | None:
    return FLAT_OUT if value == 0 else value


class LoadConfig(StrictModel):
    server: str | None = None  # host:port; default: the target's `dns` port
    rate_qps: float = Field(default=1000.0, ge=0)  # `max` (0 inside): as fast as possible
    duration_s: DurationS | None = None  # a scenario's phases set it; `soak load` needs it
    protocol: Literal["udp", "tcp", "dot", "doh"] = "udp"
    engine: Literal["builtin", "dnsperf"] = "builtin"
    workers: int = Field(default=1, ge=1, le=64)
    flows: int = Field(default=128, ge=1, le=4096)  # UDP source ports (or TCP connections)
    timeout_s: DurationS = 2.0
    # Outstanding queries per worker when rate_qps is 0 (flat out), like dnsperf -q.
    max_outstanding: int = Field(default=100, ge=1, le=60000)
    seed: int | None = None
    tls: TlsOptions = Field(default_factory=TlsOptions)
    doh: DohOptions = Field(default_factory=DohOptions)
    mix: list[QueryClass] = Field(default_factory=list)
    replay: ReplayConfig | None = None  # a capture replayed instead of a mix (soak.load.replay)

    @model_validator(mode="after")
    def _mix_or_replay(self) -> LoadConfig:
        if not self.mix and self.replay is None:
            raise ValueError("mix: give at least one class (or load.replay: a capture)")
        if self.mix and self.replay is not None:
            raise ValueError("give mix or replay, not both")
        return self

    @field_validator("rate_qps", mode="before")
    @classmethod
    def _rate(cls, value: Any, info: ValidationInfo) -> Any:
        return rate_or_max(value, info)

    @field_serializer("rate_qps", when_used="json")
    def _rate_json(self, value: float) -> float | str | None:
        return rate_json(value)

    agents: AgentsConfig | None = None  # None: the worker processes of this machine

    def server_connections(self) -> int:
        """The connections this load holds open to the server at most: `flows` per worker
        (on every agent) over TCP, DoT or DoH; none over UDP, which a server answers on
        its own few sockets."""
        if self.protocol == "udp":
            return 0
        agents = self.agents.count if self.agents is not None else 1
        return self.flows * self.workers * agents
