"""The `sinks:` section: where points go. Nothing configured: the embedded SQLite store."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from soak.units import DurationS, SizeBytes, StrictModel


class SqliteSinkConfig(StrictModel):
    kind: Literal["sqlite"]
    path: str | None = None  # default: points.db in the service's data directory


class InfluxV1SinkConfig(StrictModel):
    kind: Literal["influx_v1"]
    url: str
    db: str
    username: str | None = None
    password_env: str | None = None
    batch_size: int = Field(default=5000, ge=1)
    timeout_s: DurationS = 10.0


class InfluxV2SinkConfig(StrictModel):
    kind: Literal["influx_v2"]
    url: str
    org: str = "soak"
    bucket: str = "soak"
    token_env: str | None = None
    batch_size: int = Field(default=5000, ge=1)
    timeout_s: DurationS = 10.0


SinkConfig = Annotated[
    SqliteSinkConfig | InfluxV1SinkConfig | InfluxV2SinkConfig, Field(discriminator="kind")
]


class SpoolConfig(StrictModel):
    dir: str | None = None  # default: spool/ in the run directory
    max_bytes: SizeBytes = 1024**3
    retry_interval_s: DurationS = 5.0
