"""InfluxDB sinks: v1 through /write, v2 (and 3, VictoriaMetrics) through influxdb-client.

Both write synchronously in batches of `batch_size` lines and raise SinkError
when a batch is not accepted, so the caller can spool it; a batch the server
rejects as malformed (HTTP 400) is not retried forever: SinkWriteError says
`rejected` and the caller counts those points as dropped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from soak.errors import InputError
from soak.points import Point
from soak.sinks.base import SinkWriteError
from soak.sinks.destinations import InfluxV1SinkConfig, InfluxV2SinkConfig
from soak.sinks.lineproto import LineEncoder


def _env(name: str | None, what: str) -> str | None:
    if name is None:
        return None
    value = os.environ.get(name)
    if value is None:
        raise InputError(f"{what}: environment variable {name} is not set")
    return value


def _batches(encoder: LineEncoder, points: Sequence[Point], size: int) -> Iterator[tuple[int, str]]:
    """(points before this batch, its body): so a failure can say how many went through."""
    for start in range(0, len(points), size):
        yield start, "\n".join(encoder.lines(points[start : start + size]))


class InfluxV1Sink:
    """InfluxDB 1.x: POST /write?db=&precision=ns with line protocol."""

    def __init__(self, cfg: InfluxV1SinkConfig, name: str | None = None) -> None:
        self.name = name or f"influx_v1:{cfg.db}"
        self.batch_size = cfg.batch_size
        self._encoder = LineEncoder()
        params = {"db": cfg.db, "precision": "ns"}
        if cfg.username:
            params["u"] = cfg.username
            params["p"] = _env(cfg.password_env, f"sink {self.name}") or ""
        self._url = cfg.url.rstrip("/") + "/write"
        self._params = params
        self._client = httpx.Client(timeout=cfg.timeout_s)

    def write(self, points: Sequence[Point]) -> None:
        for done, body in _batches(self._encoder, points, self.batch_size):
            if not body:
                continue
            try:
                r = self._client.post(self._url, params=self._params, content=body.encode())
            except httpx.HTTPError as exc:
                msg = f"{self.name}: {type(exc).__name__}: {exc}"
                raise SinkWriteError(msg, accepted=done) from exc
            if r.status_code // 100 != 2:
                msg = f"{self.name}: HTTP {r.status_code} {r.text.strip()[:200]}"
                raise SinkWriteError(msg, accepted=done, rejected=r.status_code == 400)

    def flush(self) -> None:
        """Writes are synchronous; nothing is buffered."""

    def close(self) -> None:
        self._client.close()


class InfluxV2Sink:
    """InfluxDB 2.x/3.x (and anything speaking /api/v2/write) through influxdb-client's WriteApi."""

    def __init__(self, cfg: InfluxV2SinkConfig, name: str | None = None) -> None:
        from influxdb_client import InfluxDBClient
        from influxdb_client.client.write_api import SYNCHRONOUS

        self.name = name or f"influx_v2:{cfg.bucket}"
        self.batch_size = cfg.batch_size
        self._encoder = LineEncoder()
        self.org, self.bucket = cfg.org, cfg.bucket
        token = _env(cfg.token_env, f"sink {self.name}") or "none"
        self._client = InfluxDBClient(
            url=cfg.url, token=token, org=cfg.org, timeout=int(cfg.timeout_s * 1000), retries=False
        )
        self._write_api = self._client.write_api(write_options=SYNCHRONOUS)

    def write(self, points: Sequence[Point]) -> None:
        from influxdb_client import WritePrecision
        from influxdb_client.rest import ApiException

        ns: Any = WritePrecision.NS  # a str constant typed as the class in the stubs

        for done, body in _batches(self._encoder, points, self.batch_size):
            if not body:
                continue
            try:
                self._write_api.write(self.bucket, self.org, record=body, write_precision=ns)
            except ApiException as exc:
                msg = f"{self.name}: HTTP {exc.status} {exc.reason} {exc.body!s:.200}"
                raise SinkWriteError(msg, accepted=done, rejected=exc.status == 400) from exc
            except Exception as exc:  # urllib3 connection errors: the sink is down, spool
                msg = f"{self.name}: {type(exc).__name__}: {exc}"
                raise SinkWriteError(msg, accepted=done) from exc

    def flush(self) -> None:
        """Writes are synchronous; nothing is buffered."""

    def close(self) -> None:
        self._write_api.close()
        self._client.close()
