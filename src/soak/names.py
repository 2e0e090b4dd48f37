"""The time-series names of docs/architecture.md ("Time series") as data.

Sinks, reports, the Grafana dashboards and their tests check names against
this table, so a panel or a report that asks for a field the project never
writes fails a test instead of drawing an empty graph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from soak.points import RUN_TAGS


@dataclass(frozen=True, slots=True)
class Series:
    measurement: str
    tags: tuple[str, ...]  # besides RUN_TAGS
    fields: tuple[str, ...]
    # Field families: `rcode_<name>` in `load`, any mapped name in `runtime`.
    field_patterns: tuple[str, ...] = ()

    @property
    def all_tags(self) -> tuple[str, ...]:
        return RUN_TAGS + self.tags

    def has_field(self, name: str) -> bool:
        return name in self.fields or any(re.fullmatch(p, name) for p in self.field_patterns)


# The tag of an agent's part of the load. A series that has it is never part of a read
# of the run's total: the store leaves it out unless the read names the tag, and every
# dashboard query of the total says `"agent" = ''` (the tag absent).
AGENT_TAG = "agent"


def is_agent_part(tags: dict[str, str]) -> bool:
    return AGENT_TAG in tags


_LATENCY = tuple(f"lat_{q}_ms" for q in ("min", "avg", "p50", "p95", "p99", "p999", "max"))
# A window's latency histogram (soak.histogram's text form), stored beside its counts: every
# latency figure over a span is read from these merged. The embedded store keeps it;
# InfluxDB gets the window's percentiles only.
LAT_HIST_FIELD = "lat_hist"

_LOAD_FIELDS = (
    "due",
    "sent",
    "skipped",
    "completed",
    "lost",
    "late",
    "refused",
    "rate_target",
    "rate_achieved",
    *_LATENCY,
    LAT_HIST_FIELD,
    "wrong_answers",
    # A replay's fidelity, on `all` (soak.load.replay): how late its sends left
    # after the capture's timing, in the window's queries.
    "send_offset_p50_us",
    "send_offset_p99_us",
    "send_offset_max_us",
    # A replay's connections, on `all` (soak.load.replay): grown in the window.
    "conn_opened",
    "conn_reused",
    "conn_idled_out",
    "conn_errors",
    "conn_streams_reset",
    "sockets_open",
)
_RCODES = (r"rcode_[a-z0-9_]+",)
# Each phase's latency over its merged window histograms (the report's figure), one point
# per phase and class stamped at the phase's end: what a dashboard shows as the report's p99.
LATENCY_MEASUREMENT = "latency"

SERIES: dict[str, Series] = {
    s.measurement: s
    for s in (
        # Where load agents run, each agent's part of the run's seconds is a `load` series
        # of its own with the tag `agent` (its segment index), beside the run's total
        # (no `agent` tag); readers of the total leave the agents' series out (AGENT_TAG).
        Series("load", ("class", AGENT_TAG), _LOAD_FIELDS, _RCODES),
        Series(LATENCY_MEASUREMENT, ("class", "phase"), (*_LATENCY, "queries")),
        Series(
            "process",
            (),
            (
                "rss_bytes",
                "rss_anon_bytes",
                "rss_file_bytes",
                "rss_shmem_bytes",
                "pss_bytes",
                "swap_bytes",
                "fds",
                "fd_limit",
                "threads",
                "cpu_user_s",
                "cpu_system_s",
                "cpu_cores",
                "ctx_switches",
                "read_bytes",
                "write_bytes",
            ),
        ),
        # Mapped from the target's own metrics; a scenario may map more names, but
        # dashboards may only rely on these.
        Series(
            "runtime",
            (),
            (
                "goroutines",
                "heap_inuse_bytes",
                "heap_alloc_bytes",
                "querylog_dropped_total",
                # the server's own accounting (samplers.server; pdns-recursor's as mapped)
                "cache_entries",
                "cache_bytes",
                "packetcache_entries",
            ),
        ),
        Series("api", ("endpoint",), ("latency_ms", "status", "bytes", "ok")),
        Series("dig", ("probe",), ("latency_ms", "rcode", "ok")),
        Series("files", ("path",), ("bytes", "rows")),
        Series("leak", ("resource",), ("slope_per_hour", "p_value", "verdict")),
        Series("memory_map", ("kind", "path"), ("rss_bytes", "pss_bytes", "anon_bytes")),
        # Besides `kind`: the sink of sink events, the sampler of sampler errors, the plan
        # of upgrade events.
        Series("event", ("kind", "sink", "sampler", "plan"), ("message", "value")),
        Series("upgrade_check", ("plan", "check"), ("ok", "duration_ms", "message")),
        Series(
            "host",
            (),
            (
                "cpu_busy_ratio",
                "cpu_iowait_ratio",
                "cpu_steal_ratio",
                "load1",
                "cpus",
                "cpu_pressure_pct",
                "memory_pressure_pct",
                "generator_cpu_cores",
            ),
        ),
    )
}

# The values of `leak.verdict`.
LEAK_VERDICTS = ("ok", "growing", "levelling", "insufficient")
