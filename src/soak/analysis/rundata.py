"""RunData: the plain series the criteria judge, and how to read them from the point store.

The store is anything with the SqliteStore reader methods (`series`,
`points`); nothing here opens a file. Names are docs/architecture.md's time series:
`load` (tag `class`) per-window counts and latency histograms, `api` (tag `endpoint`)
latency_ms, `runtime` querylog_dropped_total, `event` kind `restarted`, and
`leak` (tag `resource`) verdicts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from soak.analysis.leaks import LeakVerdict
from soak.analysis.scenario_sections import LeaksConfig
from soak.names import LAT_HIST_FIELD
from soak.points import Point

Series = list[tuple[int, float]]  # (time_ns, value), time-ordered
StoredValue = float | str

RESTART_EVENT_KIND = "restarted"
LOAD_FIELDS = {
    "due": "due",
    "sent": "sent",
    "completed": "completed",
    "lost": "lost",
    "wrong_answers": "wrong_answers",
    "rate_target": "rate_target",
    "rate_achieved": "rate_achieved",
    "send_offset_p99_us": "send_offset_p99_us",
}


@dataclass
class ClassSeries:
    """The `load` fields of one class (or `all`), one sample per tick (per-tick counts)."""

    due: Series = field(default_factory=list)  # the schedule's queries (the ledger's windows)
    sent: Series = field(default_factory=list)
    completed: Series = field(default_factory=list)
    lost: Series = field(default_factory=list)
    wrong_answers: Series = field(default_factory=list)
    # Each window's latency histogram (soak.histogram's text form): every latency
    # figure over a span is a quantile of these merged (soak.analysis.latency).
    latency: list[tuple[int, str]] = field(default_factory=list)
    rate_target: Series = field(default_factory=list)  # q/s the phases asked, per tick
    rate_achieved: Series = field(default_factory=list)  # q/s the generator sent
    send_offset_p99_us: Series = field(default_factory=list)  # a replay's, late of the capture


@dataclass
class RunData:
    start_ns: int  # judged from here (the end of the warm-up)
    end_ns: int
    run_start_ns: int | None = None  # window offsets are told from here; default start_ns
    load: dict[str, ClassSeries] = field(default_factory=dict)  # class (and "all") -> series
    api_latency_ms: dict[str, Series] = field(default_factory=dict)  # endpoint -> series
    querylog_dropped_total: Series = field(default_factory=list)  # the target's counter
    restarts: int = 0
    verdicts: list[LeakVerdict] = field(default_factory=list)
    expect_load: bool = True  # False for a run without load: no load criteria judged
    # The machine (the `host` measurement): field -> series, for the latency criteria's detail.
    host: dict[str, Series] = field(default_factory=dict)
    # Load agents lost during the run ("agent 1 of 2 lost at +0:00:11: ..."): the cause of
    # a generator that fell short, named in its criterion.
    lost_agents: list[str] = field(default_factory=list)


class StoreReader(Protocol):
    """A run's stored points, one measurement at a time. Load agents' parts
    (soak.names.AGENT_TAG) come only where asked for: `tags` that name the tag, or
    points(agents=True)."""

    def series(
        self, soak: str, measurement: str, field: str, tags: dict[str, str] | None = None
    ) -> list[tuple[dict[str, str], list[tuple[int, StoredValue]]]]: ...

    def points(
        self, soak: str, measurement: str, since_ns: int | None = None, *, agents: bool = False
    ) -> Iterator[Point]: ...


HOST_FIELDS = ("cpu_busy_ratio", "cpu_pressure_pct")  # what a latency window's detail says


def numeric(samples: list[tuple[int, StoredValue]], since_ns: int) -> Series:
    return [(t, float(v)) for t, v in samples if t >= since_ns and not isinstance(v, str)]


def series_by_tag(
    store: StoreReader, soak_id: str, measurement: str, field_name: str, tag: str, since_ns: int
) -> dict[str, Series]:
    """One field per value of `tag`; several tag sets with the same value are merged."""
    out: dict[str, Series] = {}
    for tags, samples in store.series(soak_id, measurement, field_name):
        key = tags.get(tag, "")
        out.setdefault(key, []).extend(numeric(samples, since_ns))
    for series in out.values():
        series.sort()
    return out


def stored_verdicts(
    store: StoreReader, soak_id: str, leaks: LeaksConfig | None = None
) -> list[LeakVerdict]:
    """The latest `leak` point of each resource, as verdicts (windows unknown: 0)."""
    latest: dict[str, dict[str, StoredValue]] = {}
    for field_name in ("verdict", "slope_per_hour", "p_value"):
        for tags, samples in store.series(soak_id, "leak", field_name):
            if samples:
                latest.setdefault(tags.get("resource", ""), {})[field_name] = samples[-1][1]
    thresholds = leaks.thresholds if leaks is not None else {}
    out = []
    for resource, fields in sorted(latest.items()):
        slope, p = fields.get("slope_per_hour", 0.0), fields.get("p_value", 1.0)
        out.append(
            LeakVerdict(
                resource,
                str(fields.get("verdict", "insufficient")),
                float(slope) if not isinstance(slope, str) else 0.0,
                float(p) if not isinstance(p, str) else 1.0,
                0,
                thresholds.get(resource, 0.0),
            )
        )
    return out


def judged_from_ns(warmup_end_ns: int, run_start_ns: int | None) -> int:
    """The first sample time the criteria judge. A tick's sample covers the interval that
    ends at its time, so the tick at the warm-up's end is the warm-up's last: judged are
    the ticks after it (with no warm-up, from the run's first tick on). The report's
    phase and per-class tables count the same ticks."""
    if run_start_ns is not None and warmup_end_ns > run_start_ns:
        return warmup_end_ns + 1
    return warmup_end_ns


def run_data_from_store(
    store: StoreReader,
    soak_id: str,
    exclude_before_ns: int,
    *,
    run_start_ns: int | None = None,
    verdicts: list[LeakVerdict] | None = None,
    leaks: LeaksConfig | None = None,
    expect_load: bool = True,
) -> RunData:
    """The run's series from `exclude_before_ns` on (restarts over the whole run).

    `verdicts`: the service's latest verdicts; when None, the latest stored
    `leak` points (thresholds from `leaks` when given).
    """
    load: dict[str, ClassSeries] = {}
    since_ns = judged_from_ns(exclude_before_ns, run_start_ns)
    for attr, field_name in LOAD_FIELDS.items():
        for cls, series in series_by_tag(
            store, soak_id, "load", field_name, "class", since_ns
        ).items():
            setattr(load.setdefault(cls, ClassSeries()), attr, series)
    for tags, samples in store.series(soak_id, "load", LAT_HIST_FIELD):
        hists = [(t, v) for t, v in samples if t >= since_ns and isinstance(v, str)]
        cs = load.setdefault(tags.get("class", ""), ClassSeries())
        cs.latency = sorted(cs.latency + hists)
    api = series_by_tag(store, soak_id, "api", "latency_ms", "endpoint", since_ns)
    dropped = sorted(
        s
        for series in series_by_tag(
            store, soak_id, "runtime", "querylog_dropped_total", "soak", exclude_before_ns
        ).values()  # a counter: its value at the warm-up's end is the baseline
        for s in series
    )
    restarts = sum(
        1 for p in store.points(soak_id, "event") if p.tags.get("kind") == RESTART_EVENT_KIND
    )
    ends = [s[-1][0] for cs in load.values() for s in vars(cs).values() if s]
    ends += [s[-1][0] for s in api.values() if s] + ([dropped[-1][0]] if dropped else [])
    host = {
        f: numeric(found[0][1], since_ns)
        for f in HOST_FIELDS
        if (found := store.series(soak_id, "host", f))
    }
    return RunData(
        start_ns=exclude_before_ns,
        end_ns=max(ends, default=exclude_before_ns),
        run_start_ns=run_start_ns,
        load=load,
        api_latency_ms=api,
        querylog_dropped_total=dropped,
        restarts=restarts,
        verdicts=verdicts if verdicts is not None else stored_verdicts(store, soak_id, leaks),
        expect_load=expect_load,
        host=host,
    )
