"""How a load agent and its run's coordinator talk: three JSON calls over HTTP.

    POST /v1/register  {"agent": i}                    -> Reply
    POST /v1/heartbeat {"agent": i, "windows": [...]}  -> Reply  (renews the lease)
    POST /v1/done      {"agent": i, "totals": {...}}   -> {}

and for the sampler agent of a target on another node (soak.samplers.remote):

    POST /v1/samples   {"agent": 0, "points": [...]}   -> SamplesReply (renews the lease)

Every call carries the run's token (`Authorization: Bearer ...`; agents read it
from SOAK_AGENT_TOKEN, never from argv). The Reply says when the run's load
starts (one `start_at` for all agents, wall clock ns) and how long it lasts (every
agent stops sending at the run's end by its own clock), the asked total rate
(each agent sends its segment's share), the lease and whether to stop. An agent
that cannot renew its lease for `lease_s` stops by itself: a coordinator that is
gone (the service SIGKILLed) leaves no load running past the lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from soak.errors import SoakError

TOKEN_ENV = "SOAK_AGENT_TOKEN"
REGISTER, HEARTBEAT, DONE = "/v1/register", "/v1/heartbeat", "/v1/done"
SAMPLES = "/v1/samples"
CALL_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Reply:
    start_at_ns: int | None  # None until every agent has registered
    rate_qps: float  # the asked total; the agent sends its segment's share
    lease_s: float
    stop: bool
    duration_s: float | None = None  # from start_at to the run's end; None: until stopped

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "start_at_ns": self.start_at_ns,
            "rate_qps": self.rate_qps,
            "lease_s": self.lease_s,
            "stop": self.stop,
            "duration_s": self.duration_s,
        }

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> Reply:
        start = data.get("start_at_ns")
        return cls(
            start_at_ns=None if start is None else int(start),
            rate_qps=float(data["rate_qps"]),
            lease_s=float(data["lease_s"]),
            stop=bool(data["stop"]),
            duration_s=None if data.get("duration_s") is None else float(data["duration_s"]),
        )


@dataclass(frozen=True)
class SamplesReply:
    """The run's tick grid (origin_ns + k * interval_s; None until the run has started),
    the lease, and whether to stop."""

    origin_ns: int | None
    interval_s: float
    lease_s: float
    stop: bool

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "origin_ns": self.origin_ns,
            "interval_s": self.interval_s,
            "lease_s": self.lease_s,
            "stop": self.stop,
        }

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> SamplesReply:
        origin = data.get("origin_ns")
        return cls(
            origin_ns=None if origin is None else int(origin),
            interval_s=float(data["interval_s"]),
            lease_s=float(data["lease_s"]),
            stop=bool(data["stop"]),
        )


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
