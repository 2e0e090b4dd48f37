"""The `samplers:` section: what is sampled every tick."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from soak.agents.engine_config import AgentsConfig, EngineAgentConfig
from soak.units import DurationS, StrictModel


class ProcSamplerConfig(StrictModel):
    enabled: bool = True
    tree: bool = False  # sum the whole process tree (a server that forks workers)


class SmapsSamplerConfig(StrictModel):
    """RSS by mapping from /proc/PID/smaps (`memory_map` points)."""

    top_paths: int = Field(default=8, ge=0, le=100)  # files with most RSS; the rest: `other`
    tree: bool = False  # sum the whole process tree


ProfileKind = Literal["heap", "goroutine"]
PROFILE_KINDS: tuple[ProfileKind, ...] = ("heap", "goroutine")


class PprofSamplerConfig(StrictModel):
    """Go heap and goroutine profiles (`/debug/pprof/{heap,goroutine}?debug=1`), kept in the
    run's directory; `profile` index points in the sinks."""

    port: str = "api"  # a named port of the target
    path: str = "/debug/pprof"
    headers: dict[str, str] = Field(default_factory=dict)
    token_env: str | None = None  # environment variable holding a bearer token / API key
    token_header: str = "Authorization"  # "Authorization" sends "Bearer <token>"
    interval_s: DurationS = Field(default=600.0, ge=1.0)
    profiles: list[ProfileKind] = Field(default_factory=lambda: list(PROFILE_KINDS))
    # heap?gc=1: Go collects first, so the profile is the live heap now, not as of the last
    # collection (which may be minutes old on a quiet server); one GC per capture.
    force_gc: bool = True
    max_captures: int = Field(default=200, ge=2)  # kept per profile kind; older ones thinned
    max_bytes: int = Field(default=64 * 1024 * 1024, ge=64 * 1024)  # all kept files together
    timeout_s: DurationS = 10.0  # per profile: two fetches stay inside a tick's 30 s


class PromSamplerConfig(StrictModel):
    port: str = "metrics"  # a named port of the target
    path: str = "/metrics"
    headers: dict[str, str] = Field(default_factory=dict)
    # field name -> expression: `go_goroutines`, `sum(x_total{stage="queue"})`, max(..), min(..)
    map: dict[str, str] = Field(default_factory=dict)
    record_regex: str | None = None  # record every matching metric under its own name
    timeout_s: DurationS = 5.0


class ServerSamplerConfig(StrictModel):
    """What the server says of itself (soak.samplers.server): unbound's remote control,
    BIND's statistics channel, or PowerDNS Authoritative's HTTP API."""

    kind: Literal["unbound", "bind", "pdns"] = "unbound"
    # unbound's `control-interface` socket; a relative path is in the run's directory
    # (where `{run_dir}` in the target's files points).
    control_socket: str = "unbound.ctl"
    # BIND: the target's port its `statistics-channels` listen on (JSON, /json/v1/server);
    # pdns: its webserver's port (the API).
    port: str = "stats"
    # pdns: what its API asks for ({X-API-Key: ...}).
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: DurationS = 5.0


class HttpCallConfig(StrictModel):
    endpoint: str | None = None  # the `endpoint` tag; default "METHOD path"
    method: str = "GET"
    path: str
    port: str = "api"
    headers: dict[str, str] = Field(default_factory=dict)
    token_env: str | None = None  # environment variable holding a bearer token / API key
    token_header: str = "Authorization"  # "Authorization" sends "Bearer <token>"
    status: int = 200
    timeout_s: DurationS = 10.0


class DigProbeConfig(StrictModel):
    name: str
    type: str = "A"
    protocol: Literal["udp", "tcp", "dot", "doh"] = "udp"
    port: str = "dns"
    rcode: str = "NOERROR"
    answer: str | None = None
    timeout_s: DurationS = 2.0


class RowCountConfig(StrictModel):
    path: str  # a SQLite file, relative to the data directory
    query: str  # e.g. SELECT count(*) FROM queries


class FilesSamplerConfig(StrictModel):
    paths: list[str] = Field(default_factory=list)  # relative to the data dir; globs allowed
    row_counts: list[RowCountConfig] = Field(default_factory=list)


class SamplerAgentConfig(EngineAgentConfig):
    """The node-local samplers (proc, smaps) of a target on another node, run there by one
    agent on an engine, pinned by `placement` (docs/scale.md). Which process: exactly one
    of `pid`, `pidfile` (read on that node) or `container` (its main process)."""

    engine: Literal["local", "swarm", "kubernetes"] = "swarm"
    pid: int | None = Field(default=None, ge=1)
    pidfile: str | None = None
    container: str | None = None

    def engine_config(self) -> AgentsConfig:
        """The engine's view of the one agent: what it runs, where."""
        return AgentsConfig(
            count=1,
            engine=self.engine,
            image=self.image,
            placement=self.placement,
            namespace=self.namespace,
        )

    @model_validator(mode="after")
    def _one_way_to_find_it(self) -> SamplerAgentConfig:
        given = [k for k in ("pid", "pidfile", "container") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of pid, pidfile, container")
        return self


class SamplersConfig(StrictModel):
    interval_s: DurationS = Field(default=60.0, ge=1.0)
    proc: ProcSamplerConfig = Field(default_factory=ProcSamplerConfig)
    smaps: SmapsSamplerConfig | None = None
    prom: PromSamplerConfig | None = None
    server: ServerSamplerConfig | None = None  # the server's own accounting and query count
    pprof: PprofSamplerConfig | None = None
    http: list[HttpCallConfig] = Field(default_factory=list)
    dig: list[DigProbeConfig] = Field(default_factory=list)
    files: FilesSamplerConfig | None = None
    load: bool = True
    host: bool = True  # the machine's CPU, load and pressure, and the generator's CPU
    agent: SamplerAgentConfig | None = None  # a target on another node: sampled there
