"""Target specs: the server under test and helper services, one lifecycle each."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from soak.units import DurationS, SizeBytes, StrictModel


class PortSpec(StrictModel):
    """A named port. `host` None: a free host port is chosen at start."""

    container: int | None = Field(default=None, ge=1, le=65535)  # docker: port inside
    host: int | None = Field(default=None, ge=1, le=65535)
    protocol: Literal["tcp", "udp", "both"] = "tcp"


class HttpProbe(StrictModel):
    kind: Literal["http"]
    port: str = "api"  # a named port of the target
    path: str = "/"
    method: str = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    status: int = 200


class DnsProbe(StrictModel):
    kind: Literal["dns"]
    port: str = "dns"
    name: str
    type: str = "A"
    protocol: Literal["udp", "tcp"] = "udp"
    rcode: str | None = "NOERROR"  # None: any reply will do
    answer: str | None = None  # an address (or rdata text) that must be in the answer


class TcpProbe(StrictModel):
    kind: Literal["tcp"]
    port: str


Probe = Annotated[HttpProbe | DnsProbe | TcpProbe, Field(discriminator="kind")]


class Readiness(StrictModel):
    probes: list[Probe] = Field(default_factory=list)
    timeout_s: DurationS = 60.0
    interval_s: DurationS = 0.05  # also the resolution of the start-to-ready figure
    # Named conditions timed from start until a probe first passes
    # (the seed's "1M-entry list answering 0.0.0.0").
    conditions: dict[str, Probe] = Field(default_factory=dict)
    condition_timeout_s: DurationS = 300.0


class RenderedFile(StrictModel):
    """A file rendered into the run directory: placeholders filled from the target."""

    dest: str  # relative to the run directory
    template: Path | None = None
    content: str | None = None
    # None: 0600 for a process target (its run directory is private, so are its
    # files); 0644 for a docker target, whose container user reads it through a mount.
    mode: int | None = None


class TargetBase(StrictModel):
    name: str = "target"
    version: str = ""
    host: str = "127.0.0.1"
    ports: dict[str, PortSpec] = Field(default_factory=dict)
    ready: Readiness = Field(default_factory=Readiness)
    files: list[RenderedFile] = Field(default_factory=list)
    on_exit: Literal["fail", "restart"] = "fail"
    max_restarts: int = Field(default=5, ge=0)
    stop_timeout_s: DurationS = 10.0
    # An argv whose first output line is the version the target reports (e.g.
    # [unbound, -V]); shown in the report beside `version`. Docker: the image's label.
    version_command: list[str] | None = None


class ProcessTarget(TargetBase):
    runtime: Literal["process"]
    argv: list[str] = Field(min_length=1)
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    data_dir: str | None = None  # None: a fresh directory per run


class VolumeSpec(StrictModel):
    mount: str  # path inside the container
    name: str | None = None  # None: a fresh named volume per run; a name: reused


class BindMount(StrictModel):
    source: str
    target: str
    read_only: bool = False


class DockerTarget(TargetBase):
    runtime: Literal["docker"]
    image: str
    command: list[str] | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    network: Literal["bridge", "host"] = "bridge"
    volume: VolumeSpec | None = None
    mounts: list[BindMount] = Field(default_factory=list)
    read_only: bool = False
    tmpfs: list[str] = Field(default_factory=list)
    cap_drop: list[str] = Field(default_factory=list)
    cap_add: list[str] = Field(default_factory=list)
    no_new_privileges: bool = False
    user: str | None = None
    init: bool = True  # PID 1 servers often ignore SIGTERM (FIELD-NOTES)
    cpuset: str | None = None
    cpus: float | None = Field(default=None, gt=0)  # a CPU quota, as `docker run --cpus`
    mem_limit: SizeBytes | None = None
    nofile: int | None = None


class ExternalTarget(TargetBase):
    """Already running: no lifecycle, but still sampled if it can be found."""

    runtime: Literal["external"]
    pid: int | None = None
    pidfile: str | None = None
    container: str | None = None


TargetConfig = Annotated[
    ProcessTarget | DockerTarget | ExternalTarget, Field(discriminator="runtime")
]


class SetupCall(StrictModel):
    """An HTTP request to the target once it is ready (and after each restart with
    `every_start`), e.g. creating the zone an authoritative server answers."""

    method: str = "POST"
    port: str = "api"  # a named port of the target
    path: str
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = None  # sent as JSON
    status: list[int] = Field(default_factory=lambda: [200, 201, 204])
    every_start: bool = False
    timeout_s: DurationS = 10.0
