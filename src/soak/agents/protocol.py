"""How a load agent and its run's coordinator talk: three JSON calls over HTTP.

    POST /v1/register  {"agent": i}                    -> Reply
    POST /v1/heartbeat {"agent": i, "windows": [...]}  -> Reply  (renews the lease)
    POST /v1/done      {"agent": i, "totals": {...}}   -> {}

and for the sampler agent of a target on another node (soak.samplers.member):

    POST /v1/samples   {"agent": 0, "points": [...]}   -> SamplesReply (renews the lease)

Every call carries the run's token (`Authorization: Bearer ...`; agents read it
from SOAK_AGENT_TOKEN, never from argv). The Reply says when the run's load
starts (one `start_at` for all agents, wall clock ns) and how long it lasts (every
agent stops sending at the run's end by its own clock), the agent's share of the
asked rate (the coordinator divides it: soak.load.fleet.lease), the lease and
whether to stop. An agent
that cannot renew its lease for `lease_s` stops by itself: a coordinator that is
gone (the service SIGKILLed) leaves no load running past the lease. Both kinds of
agent keep it with Lease and wait for the run's start with wait_for_start: the
load member (soak.load.fleet.member) and the sampler member (soak.samplers.member) take
them from here, a layer below both. Points travel as soak.points.point_to_json.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any, Self, TypeVar, get_args, get_type_hints

import httpx

from soak.errors import SoakError

TOKEN_ENV = "SOAK_AGENT_TOKEN"
REGISTER, HEARTBEAT, DONE = "/v1/register", "/v1/heartbeat", "/v1/done"
SAMPLES = "/v1/samples"
CALL_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class JsonReply:
    """A coordinator's reply as JSON and back: every field by its name, a number read as
    its field's type; an optional field (`X | None`) may be absent or null."""

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> Self:
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}
        for f in fields(cls):
            kinds = get_args(hints[f.name]) or (hints[f.name],)
            optional = type(None) in kinds
            value = data.get(f.name) if optional else data[f.name]
            kind = next(k for k in kinds if k is not type(None))
            values[f.name] = None if value is None else kind(value)
        return cls(**values)


@dataclass(frozen=True)
class Reply(JsonReply):
    start_at_ns: int | None  # None until every agent has registered
    share_qps: float  # this agent's share of the asked total rate: what it sends
    lease_s: float
    stop: bool
    duration_s: float | None = None  # from start_at to the run's end; None: until stopped

    @property
    def started(self) -> bool:
        return self.start_at_ns is not None


@dataclass(frozen=True)
class SamplesReply(JsonReply):
    """The run's tick grid (origin_ns + k * interval_s; None until the run has started),
    the lease, and whether to stop."""

    origin_ns: int | None
    interval_s: float
    lease_s: float
    stop: bool

    @property
    def started(self) -> bool:
        return self.origin_ns is not None


class CoordinatorUnreachable(SoakError):
    """A call to the coordinator failed (refused, timed out, or an error status)."""


class CoordinatorRefused(SoakError):
    """The coordinator answered no (a wrong token, an unknown agent): no use trying again."""


class CoordinatorClient:
    """The agent's side: one call at a time, each bounded by CALL_TIMEOUT_S."""

    def __init__(self, url: str, token: str, agent: int) -> None:
        self.agent = agent
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=CALL_TIMEOUT_S,
            trust_env=False,  # a proxy in the environment must not stand between them
        )

    def register(self) -> Reply:
        return Reply.from_json_dict(self._post(REGISTER, {}))

    def heartbeat(self, windows: list[dict[str, Any]]) -> Reply:
        return Reply.from_json_dict(self._post(HEARTBEAT, {"windows": windows}))

    def done(self, totals: dict[str, Any]) -> None:
        self._post(DONE, {"totals": totals})

    def samples(self, points: list[dict[str, Any]]) -> SamplesReply:
        return SamplesReply.from_json_dict(self._post(SAMPLES, {"points": points}))

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._http.post(path, json={"agent": self.agent, **body})
        except httpx.HTTPError as exc:
            raise CoordinatorUnreachable(f"{path}: {exc}") from None
        if 400 <= response.status_code < 500:
            raise CoordinatorRefused(f"{path}: HTTP {response.status_code} {response.text}")
        if response.status_code != 200:
            raise CoordinatorUnreachable(f"{path}: HTTP {response.status_code} {response.text}")
        data: dict[str, Any] = response.json()
        return data


class LeaseLost(SoakError):
    """The coordinator could not be reached for a whole lease: the agent stopped."""


@dataclass
class Clocks:
    monotonic: Callable[[], float] = time.monotonic
    wall_ns: Callable[[], int] = time.time_ns
    sleep: Callable[[float], None] = time.sleep


class Lease:
    """When the last call got through, and whether the lease has run out since."""

    def __init__(self, lease_s: float, clock: Callable[[], float]) -> None:
        self.lease_s, self.clock = lease_s, clock
        self.renewed_s = clock()

    def renew(self, reply: Reply) -> Reply:
        self.renew_s(reply.lease_s)
        return reply

    def renew_s(self, lease_s: float) -> None:
        """A call got through: the lease (as the coordinator now says it) starts again."""
        self.lease_s, self.renewed_s = lease_s, self.clock()

    def check(self, why: CoordinatorUnreachable) -> None:
        silent_s = self.clock() - self.renewed_s
        if silent_s > self.lease_s:
            raise LeaseLost(f"no answer from the coordinator for {silent_s:.1f} s ({why}): stopped")


AnyReply = TypeVar("AnyReply", Reply, SamplesReply)


def wait_for_start(
    call: Callable[[], AnyReply],
    lease_s: float,
    clocks: Clocks,
    deadline_s: float,
    poll_s: float,
) -> AnyReply:
    """Call every `poll_s` until the reply says the run has started or is to stop: the
    load agents' start_at and the sampler agent's tick grid are waited for alike. A
    coordinator silent for a lease is LeaseLost; no start within `deadline_s`, an error."""
    lease = Lease(lease_s, clocks.monotonic)
    end = clocks.monotonic() + deadline_s
    while True:
        try:
            reply = call()
            lease.renew_s(reply.lease_s)
            if reply.stop or reply.started:
                return reply
        except CoordinatorUnreachable as exc:
            lease.check(exc)
        if clocks.monotonic() > end:
            raise SoakError(f"no start from the coordinator within {deadline_s:g} s")
        clocks.sleep(poll_s)
