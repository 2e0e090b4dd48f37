"""The labelled leak corpus: its fixture files, their replay through a run's leak passes,
and the score of each replay (bench/leak_accuracy.py prints it; tests/unit runs a subset).

A fixture (tests/fixtures/leaks/NAME.json) is one recording by soak itself of a real
process at 1-s ticks (bench/record_leak_corpus.py): per resource the sampled values, one a
tick (null where a tick had none), and a label: `leak` with its true rate (units per
recorded second) and onset, or `healthy` with its shape. Resources whose truth is not
known (the heap of a goroutine leak) carry no label and are not scored.

Time scale: a recording of minutes stands for a run of hours. Its timestamps are
stretched by `time_scale` (60: each recorded second is a minute of a run at the default
1-min ticks), so the replay judges it with the *default* leaks config (10-min windows,
6 of them, the default thresholds per hour): the rates a fixture's process was given are
chosen against those thresholds at that scale. The stretch changes no value, only the
clock; its only cost is that a window holds 10 samples instead of a real run's 10.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import statistics
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from soak.analysis.leaks import LeakFits, LeakVerdict
from soak.analysis.scenario_sections import LeaksConfig
from soak.analysis.verdicts import run_verdicts
from soak.clock import NS_PER_S
from soak.points import Point
from soak.sinks.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "leaks"
# Recorded in real time (time_scale 1, 10-s ticks, gzip): the corpus the scorer reports.
REAL_TIME = FIXTURES / "real-time"
HALVES = ("tuning", "held-out")
START_NS = 1_764_547_200 * NS_PER_S  # 2025-12-01 00:00 UTC: any fixed origin
RUN_ID = "corpus"
# The recordings' machine (24 GiB, a target without a memory limit): what a run there
# measures a rise against (soak.runs.ticking.leak_limits).
MACHINE_LIMITS = {
    "rss_anon_bytes": 24 * 1024**3,
    "heap_inuse_bytes": 24 * 1024**3,
}

# Where each judged resource is sampled (docs/architecture.md "Time series").
MEASUREMENT = {
    "rss_anon_bytes": "process",
    "fds": "process",
    "threads": "process",
    "heap_inuse_bytes": "runtime",
    "goroutines": "runtime",
    # What the server says it holds and has answered (its own accounting): evidence
    # beside RSS, never judged as a leak on its own.
    "cache_bytes": "runtime",
    "cache_entries": "runtime",
    "server_queries": "runtime",
    "server_memory_bytes": "runtime",  # BIND's memory contexts in use, all of them
}


@dataclass(frozen=True, slots=True)
class Label:
    kind: str  # "leak" or "healthy"
    shape: str  # "linear" for a leak; flat, startup, cache-cap, sawtooth, batch, ...
    rate_per_s: float = 0.0  # a leak's true rate, units per recorded second
    onset_s: float = 0.0  # a leak's start, recorded seconds from the first tick
    # False where the series moves by more than the leak itself (a Go process's RSS: the
    # GC lets the heap reach twice the live heap, so RSS grows up to twice as fast): the
    # rate is then a lower bound, used for "must be detected", not for the slope error.
    rate_exact: bool = True


@dataclass(frozen=True, slots=True)
class Fixture:
    name: str
    source: str  # what was recorded: the server and its flags
    tick_s: float  # recorded seconds between ticks
    time_scale: float  # replayed seconds per recorded second
    warmup_s: float  # the recording's warm-up, recorded seconds
    series: dict[str, list[float | None]]
    labels: dict[str, Label]
    # What an operator would declare in `leaks.caps` (a cache's memory): used when the
    # scorer is asked to (bench/leak_accuracy.py --declared-caps), not by default.
    caps: dict[str, float] = field(default_factory=dict)
    # The real-time corpus is split, fixed in its fixtures: parameters are chosen on the
    # "tuning" half only, the "held-out" half is scored apart. None: the stretched corpus.
    half: str | None = None
    recorded: str = ""  # how, when and on what machine it was recorded

    @property
    def recorded_s(self) -> float:
        return max(len(v) for v in self.series.values()) * self.tick_s


def load(path: Path) -> Fixture:
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    raw = json.loads(text)
    return Fixture(
        name=raw["name"],
        source=raw["source"],
        tick_s=float(raw["tick_s"]),
        time_scale=float(raw["time_scale"]),
        warmup_s=float(raw["warmup_s"]),
        series={k: list(v) for k, v in raw["series"].items()},
        labels={k: Label(**v) for k, v in raw["labels"].items()},
        caps={k: float(v) for k, v in raw.get("caps", {}).items()},
        half=raw.get("half"),
        recorded=raw.get("recorded", ""),
    )


def save(fx: Fixture, path: Path) -> None:
    """One line per series: small, and a diff shows which series changed."""
    head = {
        "name": fx.name,
        "source": fx.source,
        "tick_s": fx.tick_s,
        "time_scale": fx.time_scale,
        "warmup_s": fx.warmup_s,
        **({"caps": fx.caps} if fx.caps else {}),
        **({"half": fx.half, "recorded": fx.recorded} if fx.half else {}),
        "labels": {
            k: {
                "kind": v.kind,
                "shape": v.shape,
                "rate_per_s": v.rate_per_s,
                "onset_s": v.onset_s,
                "rate_exact": v.rate_exact,
            }
            for k, v in fx.labels.items()
        },
    }
    lines = [json.dumps(head)[:-1] + ', "series": {']
    series = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in fx.series.items()]
    lines += [",\n".join(series), "}}"]
    text = "\n".join(lines) + "\n"
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path.write_text(text)


def fixtures(folder: Path = FIXTURES, half: str | None = None) -> list[Fixture]:
    """The fixtures of a folder (`*.json`, `*.json.gz`), of one half where asked."""
    paths = sorted([*folder.glob("*.json"), *folder.glob("*.json.gz")])
    return [fx for fx in map(load, paths) if half is None or fx.half == half]


@dataclass(frozen=True, slots=True)
class Pass:
    at_s: float  # recorded seconds from the first tick
    verdicts: dict[str, LeakVerdict]


def from_warmup_end(fx: Fixture) -> Fixture | None:
    """The fixture with its warm-up ending at its leaks' onset, only its leaks labelled."""
    leaks = {r: lab for r, lab in fx.labels.items() if lab.kind == "leak"}
    if not leaks:
        return None
    onset_s = min(lab.onset_s for lab in leaks.values())
    labels = {
        r: dataclasses.replace(lab, shape="linear from the warm-up's end")
        for r, lab in leaks.items()
    }
    return dataclasses.replace(fx, name=f"{fx.name}@onset", warmup_s=onset_s, labels=labels)


def replay(fx: Fixture, cfg: LeaksConfig | None = None) -> Iterator[Pass]:
    """The run's leak passes over the fixture, tick by tick: each tick's points written to
    a real store (the run's SqliteStore), then `run_verdicts` with the fits kept across
    passes, every `cfg.interval_s` of replayed time, as soak.runs.ticking.Ticker.analyse
    is called; since the warm-up's end."""
    cfg = cfg or LeaksConfig()
    step_ns = round(fx.tick_s * fx.time_scale * NS_PER_S)
    since_ns = START_NS + round(fx.warmup_s * fx.time_scale * NS_PER_S)
    interval_ns = round(cfg.interval_s * NS_PER_S)
    ticks = max(len(v) for v in fx.series.values())
    tags = {"soak": RUN_ID, "scenario": fx.name, "target": "corpus", "version": "recorded"}
    with tempfile.TemporaryDirectory(prefix="leakcorpus-") as tmp:
        store = SqliteStore(Path(tmp) / "points.db")
        try:
            fits = LeakFits()
            next_pass_ns = START_NS + interval_ns
            for i in range(ticks):
                t_ns = START_NS + i * step_ns
                store.write(_tick_points(fx, i, t_ns, tags))
                if t_ns < next_pass_ns:
                    continue
                next_pass_ns += interval_ns * ((t_ns - next_pass_ns) // interval_ns + 1)
                found = run_verdicts(
                    store,
                    RUN_ID,
                    cfg,
                    since_ns,
                    fits,
                    limits=MACHINE_LIMITS,
                    sample_interval_s=fx.tick_s * fx.time_scale,
                )
                yield Pass(i * fx.tick_s, {v.resource: v for v in found})
        finally:
            store.close()


def _tick_points(fx: Fixture, i: int, t_ns: int, tags: dict[str, str]) -> list[Point]:
    fields: dict[str, dict[str, float | str]] = {}
    for resource, values in fx.series.items():
        if i < len(values) and values[i] is not None:
            fields.setdefault(MEASUREMENT[resource], {})[resource] = float(values[i])  # type: ignore[arg-type]
    return [Point(m, f, t_ns, tags) for m, f in fields.items()]


@dataclass
class Score:
    """One labelled resource of one fixture over every pass of its replay."""

    fixture: str
    resource: str
    label: Label
    threshold_per_hour: float
    time_scale: float  # the fixture's: replayed seconds per recorded second
    judged_passes: int = 0  # passes after the judged start with a verdict other than insufficient
    growing_passes: int = 0
    levelling_passes: int = 0
    insufficient_passes: int = 0
    first_growing_s: float | None = None  # recorded seconds from the first tick
    final: str = "none"
    final_slope_per_hour: float = 0.0  # replayed hours
    verdicts: list[str] = field(default_factory=list)

    @property
    def true_per_hour(self) -> float:
        """The label's rate in the units the verdicts give (per replayed hour)."""
        return self.label.rate_per_s * 3600.0 / self.time_scale

    @property
    def must_detect(self) -> bool:
        return self.label.kind == "leak" and self.true_per_hour >= self.threshold_per_hour

    @property
    def false_alarms(self) -> int:
        return self.growing_passes if self.label.kind == "healthy" else 0

    @property
    def detected(self) -> bool:
        return self.label.kind == "leak" and self.first_growing_s is not None

    @property
    def detection_delay_s(self) -> float | None:
        """Onset to the first `growing`, recorded seconds."""
        if self.first_growing_s is None or self.label.kind != "leak":
            return None
        return self.first_growing_s - self.label.onset_s

    @property
    def slope_error(self) -> float | None:
        """(final slope - true) / true, of a leak."""
        if self.label.kind != "leak" or self.true_per_hour == 0 or not self.label.rate_exact:
            return None
        return (self.final_slope_per_hour - self.true_per_hour) / self.true_per_hour

    @property
    def failed(self) -> bool:
        """A false alarm, or a leak at or above its threshold never called `growing`."""
        return self.false_alarms > 0 or (self.must_detect and not self.detected)


def score(fx: Fixture, cfg: LeaksConfig | None = None, declared_caps: bool = False) -> list[Score]:
    cfg = cfg or LeaksConfig()
    if declared_caps and fx.caps:
        cfg = cfg.model_copy(update={"caps": {**cfg.caps, **fx.caps}})
    scores = {
        r: Score(fx.name, r, label, cfg.thresholds.get(r, 0.0), fx.time_scale)
        for r, label in fx.labels.items()
        if r in cfg.thresholds
    }
    for p in replay(fx, cfg):
        for r, s in scores.items():
            v = p.verdicts.get(r)
            if v is None:
                continue
            s.verdicts.append(v.verdict)
            s.final, s.final_slope_per_hour = v.verdict, v.slope_per_hour
            if v.verdict == "insufficient":
                s.insufficient_passes += 1
                continue
            s.judged_passes += 1
            s.levelling_passes += v.verdict == "levelling"
            if v.verdict == "growing":
                s.growing_passes += 1
                if s.first_growing_s is None:
                    s.first_growing_s = p.at_s
    return list(scores.values())


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
