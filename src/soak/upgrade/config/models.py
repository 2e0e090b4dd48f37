"""The upgrade plan's models: old and new versions, data, populate, snapshot, migrate,
the load through the swap, rollback and the version matrix (checks: checks.py)."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from soak.load.load_config import QueryClass
from soak.sinks.destinations import SinkConfig
from soak.targets.specs import Probe, TargetConfig
from soak.units import DurationS, FileModel, StrictModel
from soak.upgrade import jsonpath
from soak.upgrade.config.checks import Check

# ---------------------------------------------------------------- data


class DataSpec(StrictModel):
    """Where old and new keep their state. Neither field: a fresh, empty one.

    `archive`: a tar (optionally gzip) extracted into a fresh directory (process
    targets) or into a fresh named volume (docker targets); the archive itself is
    only read. `volume`: a docker named volume, used as it is (created if missing).
    """

    archive: str | None = None
    volume: str | None = None
    # docker: chown the extracted archive to this user[:group] of the image (names are
    # resolved inside it); the engine unpacks archives as root, and a server that runs as
    # its own user cannot write root-owned files (the seed's root-owned volume bug).
    owner: str | None = None


# ---------------------------------------------------------------- populate


class DnsQuerySpec(StrictModel):
    name: str
    type: str = "A"


class ApiStep(StrictModel):
    kind: Literal["api"]
    port: str = "api"  # a named port of the target
    method: str = "GET"
    path: str
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = Field(default=None, alias="json")
    status: int | None = 200  # None: any 2xx
    save: dict[str, str] = Field(default_factory=dict)  # value name -> JSON path
    timeout_s: DurationS = 10.0

    @field_validator("save")
    @classmethod
    def _paths(cls, value: dict[str, str]) -> dict[str, str]:
        for path in value.values():
            jsonpath.parse(path)
        return value


class DnsStep(StrictModel):
    """A list of queries, or `count` queries taken in turn from a file ("name type" lines)."""

    kind: Literal["dns"]
    port: str = "dns"
    protocol: Literal["udp", "tcp", "dot", "doh"] = "udp"
    queries: list[DnsQuerySpec] = Field(default_factory=list)
    file: str | None = None
    count: int | None = Field(default=None, ge=1)
    rcode: str | None = None  # every reply must have it; None: any reply
    timeout_s: DurationS = 2.0

    @model_validator(mode="after")
    def _source(self) -> DnsStep:
        if bool(self.queries) == bool(self.file):
            raise ValueError("give either `queries` or `file`")
        return self


class CommandStep(StrictModel):
    """Run in the target's environment: `docker exec` for a container, else on the host."""

    kind: Literal["command"]
    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    timeout_s: DurationS = 60.0
    save_stdout: str | None = None  # value name for the stripped standard output


class WaitStep(StrictModel):
    kind: Literal["wait"]
    probe: Probe
    timeout_s: DurationS = 30.0
    interval_s: DurationS = 0.2


PopulateStep = Annotated[ApiStep | DnsStep | CommandStep | WaitStep, Field(discriminator="kind")]

# ---------------------------------------------------------------- snapshot


class ApiSnapshot(StrictModel):
    kind: Literal["api"]
    name: str
    port: str = "api"
    path: str
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: DurationS = 10.0

    method: ClassVar[str] = "GET"  # a snapshot only reads
    body: ClassVar[Any] = None


class DigSnapshot(StrictModel):
    kind: Literal["dig"]
    name: str
    port: str = "dns"
    qname: str
    type: str = "A"
    protocol: Literal["udp", "tcp", "dot", "doh"] = "udp"
    timeout_s: DurationS = 2.0


class CorpusSnapshot(StrictModel):
    """Many names asked of the old version; a `corpus` check asks them of the new."""

    kind: Literal["corpus"]
    name: str
    port: str = "dns"
    file: str  # `name [type]` lines, relative to the plan
    count: int | None = Field(default=None, ge=1, le=1_000_000)  # None: every line once
    rate_qps: float = Field(default=1000.0, gt=0, le=50_000)
    parallel: int = Field(default=32, ge=1, le=256)  # queries in flight
    protocol: Literal["udp", "tcp", "dot", "doh"] = "udp"
    timeout_s: DurationS = 2.0


SnapshotItem = Annotated[ApiSnapshot | DigSnapshot | CorpusSnapshot, Field(discriminator="kind")]

# ---------------------------------------------------------------- migrate


class MigrateContainer(StrictModel):
    """A one-shot container with the data volume mounted (docker plans)."""

    image: str
    entrypoint: list[str] | None = None  # None: the image's
    command: list[str] = Field(min_length=1)
    mount: str  # where the data volume is mounted inside
    user: str | None = None


class Migrate(StrictModel):
    command: list[str] | None = None  # on the host, placeholders filled
    container: MigrateContainer | None = None
    env: dict[str, str] = Field(default_factory=dict)
    timeout_s: DurationS = 300.0

    @model_validator(mode="after")
    def _one(self) -> Migrate:
        if (self.command is None) == (self.container is None):
            raise ValueError("give either `command` or `container`")
        return self


# ---------------------------------------------------------------- load during the swap


class SwapLoad(StrictModel):
    """A steady query load on the service address while old stops and new starts.

    It starts after the snapshot, runs through stop old, migrate, start new, and
    stops `settle_s` after the new version is ready. The new version gets the old
    one's host ports (the same published port for docker, the same port for a
    process), so the load never changes its address. One worker: its longest
    silence is the service's longest time without answers.
    """

    port: str = "dns"
    rate_qps: float = Field(default=500.0, gt=0, le=50_000)
    protocol: Literal["udp", "tcp", "dot", "doh"] = "udp"
    mix: list[QueryClass] = Field(min_length=1)
    timeout_s: DurationS = 1.0  # a reply later than this counts as lost
    flows: int = Field(default=16, ge=1, le=1024)
    settle_s: DurationS = 2.0
    max_duration_s: DurationS = 600.0  # the load stops by itself after this


# ---------------------------------------------------------------- rollback


class Rollback(StrictModel):
    """After the new version's checks: the old version started again on the data the
    new one wrote (optionally after a down-migration), with its own checklist."""

    old: TargetConfig | None = None  # default: the plan's `old`
    migrate: Migrate | None = None
    checks: list[Check] = Field(min_length=1)


# ---------------------------------------------------------------- version matrix


class Matrix(StrictModel):
    """Several old versions against one new: each entry is a label and the plan
    values it sets (`key.path: value`, as `--set`), e.g.
    `old: {"4.4": {vars.old_image: app:4.4, old.version: "4.4"}}`."""

    old: dict[str, dict[str, Any]] = Field(min_length=1)


# ---------------------------------------------------------------- what the server says it is


class ServerVersion(StrictModel):
    """How each started version tells its own version (recorded, never judged): a
    command (`argv`, run like a `command` check: in the container, else on the host) or
    an HTTP GET (`path` on `port`, `json`: a JSON path into the answer). `match`: a regex
    whose first group (or whole match) is the version; default the first line."""

    argv: list[str] | None = Field(default=None, min_length=1)
    port: str = "api"
    path: str | None = None
    json_path: str | None = Field(default=None, alias="json")
    match: str | None = None
    timeout_s: DurationS = 10.0

    @model_validator(mode="after")
    def _one_way(self) -> ServerVersion:
        if (self.argv is None) == (self.path is None):
            raise ValueError("give argv (a command) or path (an HTTP GET), one of them")
        if self.json_path is not None:
            jsonpath.parse(self.json_path)
        if self.match is not None:
            re.compile(self.match)
        return self


# ---------------------------------------------------------------- the plan


class UpgradePlan(FileModel):
    name: str
    description: str = ""
    allow_targets: list[str] = Field(default_factory=list)
    old: TargetConfig
    new: TargetConfig
    data: DataSpec = Field(default_factory=DataSpec)
    vars: dict[str, str] = Field(default_factory=dict)  # defaults for {{name}}
    # Names whose values are never printed (these only: a saved `dnskey` is DNS data).
    secrets: list[str] = Field(default_factory=list)
    server_version: ServerVersion | None = None
    populate: list[PopulateStep] = Field(default_factory=list)
    snapshot: list[SnapshotItem] = Field(default_factory=list)
    migrate: Migrate | None = None
    load: SwapLoad | None = None  # a steady load through the swap
    checks: list[Check] = Field(min_length=1)
    rollback: Rollback | None = None
    matrix: Matrix | None = None
    sinks: list[SinkConfig] = Field(default_factory=list)
    _source: str = PrivateAttr(default="plan")

    @property
    def source(self) -> str:
        return self._source

    def versions(self) -> list[TargetConfig]:
        """Every version the plan starts: old, new and a rollback's own old."""
        back = [self.rollback.old] if self.rollback and self.rollback.old else []
        return [self.old, self.new, *back]

    @property
    def data_on_host(self) -> bool:
        """The data is a directory on this host (bind-mounted into a docker version at
        its `volume.mount`) unless every version is a docker one (a named volume): a
        locally built binary runs on the data an old released image wrote."""
        return any(v.runtime != "docker" for v in self.versions())

    @property
    def uses_docker(self) -> bool:
        return any(v.runtime == "docker" for v in self.versions())

    def saved_names(self) -> set[str]:
        names: set[str] = set()
        for step in self.populate:
            if isinstance(step, ApiStep):
                names.update(step.save)
            elif isinstance(step, CommandStep) and step.save_stdout:
                names.add(step.save_stdout)
        return names
