"""Load statistics: what a worker reports each second and how reports merge.

Workers keep plain counters and a dict of latency (whole microseconds) ->
count; they ship one `Interval` per second. The parent folds those into latency
histograms (soak.histogram: HdrHistogram's buckets at two significant digits), so
percentiles come from merged histograms, never from averaged percentiles; each
window's histogram is stored with its counts (`lat_hist`). Memory is bounded:
counters and histograms only.

Accounting follows dnsperf: every query sent ends as completed (a reply
within the timeout) or lost; a reply after the timeout is counted as `late`
and is never a latency sample. Over TCP, DoT and DoH a client that hangs up
on purpose (connection.hangup_fraction) ends its queries still in flight as
`abandoned`, neither answered nor lost. Counts come from closed windows of the
run's grid (soak.load.ledger), each query in the second it was due, so every
window, and so every sum of windows, has sent == completed + lost + abandoned
and due == sent + skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dns.rcode

from soak.histogram import LatencyHistogram
from soak.load.ledger import ClassWindow, Window

HANDSHAKE_HIGHEST_US = 10_000_000
H2_COUNTS = ("streams_reset", "streams_refused", "streams_retried", "goaways")  # DoH's, below


@dataclass
class Connections:
    """Stream transports (TCP, DoT, DoH): connections over one interval of one worker."""

    opened: int = 0
    errors: int = 0  # connects or handshakes that failed, resets, closes with answers due
    resumed: int = 0  # TLS sessions resumed
    handshake_us: dict[int, int] = field(default_factory=dict)  # TCP connect + TLS
    hung_up: int = 0  # closed on purpose with answers still due (connection.hangup_fraction)
    streams_reset: int = 0  # DoH (_fastdoh_defs.h, doh.DohFlow): streams the server reset,
    streams_refused: int = 0  # of them REFUSED_STREAM (not processed),
    streams_retried: int = 0  # of those sent again once on their connection (compiled only);
    goaways: int = 0  # GOAWAY frames


@dataclass
class Interval:
    worker: int
    interval_s: float
    rate_target_qps: float  # this worker's share during the interval
    backlog: int  # queries due but not yet sent at the end of the interval
    skipped: int  # queries dropped from the schedule: the generator fell > 1 s behind
    # The worker's windows closed in this interval (soak.load.ledger), and the grid
    # second below which every window of the worker has now been handed out.
    windows: list[Window] = field(default_factory=list)
    closed_below: int = 0
    unexpected: int = 0  # replies that match no outstanding query
    final: bool = False
    socket_errors: int = 0  # ICMP unreachable and similar, seen on send or receive
    # The longest silence (no reply within the timeout) of this worker that ended in
    # this interval, and when it ended (monotonic ns, the same clock in every process).
    max_gap_ns: int = 0
    max_gap_end_ns: int = 0
    connections: Connections | None = None
    # What the sockets took and gave, counted at the calls and kept apart from the
    # windows (the audit's witness, soak.report.witnesses): datagrams the kernel took,
    # replies read (late, duplicate and stray ones included), queries counted sent that
    # the socket refused twice. A loop that keeps none leaves `sockets_counted` False.
    sockets_counted: bool = False
    socket_sent: int = 0
    socket_received: int = 0
    send_failed: int = 0


def rcode_name(code: int) -> str:
    try:
        return dns.rcode.to_text(dns.rcode.Rcode(code))
    except ValueError:
        return f"RCODE{code}"


# The schedule's queries and what became of them, as a summary and a window give them.
SCHEDULED = ("due", "sent", "skipped", "completed", "lost", "late")


class ClassStats:
    """Running totals of one class (or of all classes) with a latency histogram in µs
    (soak.histogram: the one the ledger's windows store)."""

    def __init__(self, highest_us: int) -> None:
        self.highest_us = max(highest_us, 2)
        self.sent = self.completed = self.lost = self.late = self.wrong = self.unexpected = 0
        self.abandoned = self.due = self.skipped = self.refused = 0
        self.rcodes: dict[int, int] = {}
        self.hist = LatencyHistogram()

    def reset(self) -> None:
        self.sent = self.completed = self.lost = self.late = self.wrong = self.unexpected = 0
        self.abandoned = self.due = self.skipped = self.refused = 0
        self.rcodes = {}
        self.hist.clear()

    def add(self, ci: ClassWindow) -> None:
        self.due += ci.due
        self.sent += ci.sent
        self.skipped += ci.skipped
        self.completed += ci.completed
        self.lost += ci.lost
        self.late += ci.late
        self.wrong += ci.wrong
        self.refused += ci.refused
        self.abandoned += ci.abandoned
        for code, n in ci.rcodes.items():
            self.rcodes[code] = self.rcodes.get(code, 0) + n
        self.add_latencies(ci.lat_us)

    def add_latencies(self, lat_us: dict[int, int]) -> None:
        record = self.hist.record
        highest = self.highest_us
        for us, n in lat_us.items():
            record(us if us < highest else highest, n)

    def latency_ms(self, *, stddev: bool = True) -> dict[str, float | None]:
        """min, avg, p50, p95, p99, p999, max (and stddev) in ms (None without samples)."""
        out = self.hist.latency_ms()
        if stddev:
            out["stddev"] = self.hist.stddev_ms()
        return out

    def rcode_counts(self) -> dict[str, int]:
        return {rcode_name(c): n for c, n in sorted(self.rcodes.items())}

    def counts(self) -> dict[str, int]:
        """The schedule's queries and what became of them (summary and fields both)."""
        return {name: getattr(self, name) for name in SCHEDULED}

    def summary(self, *, stddev: bool = True) -> dict[str, Any]:
        out = {
            **self.counts(),
            "wrong_answers": self.wrong,
            "rcodes": self.rcode_counts(),
            "latency_ms": self.latency_ms(stddev=stddev),
        }
        if self.abandoned:  # only clients that hang up on purpose abandon queries
            out["abandoned"] = self.abandoned
        return out

    def fields(self, window_s: float) -> dict[str, float]:
        """The `load` measurement's fields of closed windows covering `window_s` grid
        seconds: counts are their sums, rates those over the seconds."""
        out: dict[str, float] = {
            **self.counts(),
            "rate_target": self.due / window_s if window_s > 0 else 0.0,
            "rate_achieved": self.sent / window_s if window_s > 0 else 0.0,
            "wrong_answers": self.wrong,
        }
        if self.refused:
            out["refused"] = self.refused
        if self.abandoned:
            out["abandoned"] = self.abandoned
        lat = self.latency_ms(stddev=False)
        for key in ("min", "avg", "p50", "p95", "p99", "p999", "max"):
            value = lat[key]
            if value is not None:  # no samples: the field is absent, not a fake 0
                out[f"lat_{key}_ms"] = value
        for code, n in self.rcodes.items():
            out[f"rcode_{rcode_name(code).lower()}"] = n
        return out


@dataclass
class SocketCounts:
    """The sockets' own counts over some intervals (Interval.socket_sent ...); `counted`
    only when every interval came from a loop that keeps them."""

    counted: bool | None = None  # None: no interval yet
    socket_sent: int = 0
    socket_received: int = 0
    send_failed: int = 0

    def add(self, iv: Interval) -> None:
        self.counted = (
            iv.sockets_counted if self.counted is None else (self.counted and iv.sockets_counted)
        )
        self.socket_sent += iv.socket_sent
        self.socket_received += iv.socket_received
        self.send_failed += iv.send_failed

    def as_dict(self) -> dict[str, int] | None:
        """result.json's `engine_counters` (None where a loop kept none)."""
        if not self.counted:
            return None
        return {
            "socket_sent": self.socket_sent,
            "socket_received": self.socket_received,
            "send_failed": self.send_failed,
        }


class MixStats:
    """Per-class stats plus `all`, fed with worker intervals."""

    def __init__(self, class_names: list[str], highest_us: int) -> None:
        self.names = list(class_names)
        self.classes = [ClassStats(highest_us) for _ in class_names]
        self.all = ClassStats(highest_us)
        self.seconds = 0  # grid seconds whose windows were added
        self.unexpected = 0
        self.backlog_max = 0
        self.skipped = 0
        self.socket_errors = 0
        self.sockets = SocketCounts()
        self.streams = False  # a stream transport reported connections
        self.conn = Connections()
        self.handshake = ClassStats(HANDSHAKE_HIGHEST_US)

    def reset(self) -> None:
        for stats in (*self.classes, self.all, self.handshake):
            stats.reset()
        self.seconds = 0
        self.unexpected = 0
        self.backlog_max = 0
        self.skipped = 0
        self.socket_errors = 0
        self.sockets = SocketCounts()
        self.conn = Connections()

    def add_window(self, window: Window) -> None:
        """A closed window of the run's grid (all sources merged)."""
        for stats, ci in zip(self.classes, window.classes, strict=True):
            stats.add(ci)
            self.all.add(ci)
        self.seconds += 1

    def add(self, iv: Interval) -> None:
        """A worker's interval: what is not counted per window (its windows go through
        a ledger.Merger and add_window)."""
        self.backlog_max = max(self.backlog_max, iv.backlog)
        self.skipped += iv.skipped  # dropped because the generator fell behind
        self.unexpected += iv.unexpected
        self.socket_errors += iv.socket_errors
        self.sockets.add(iv)
        if iv.connections is not None:
            self.streams = True
            for name in ("opened", "errors", "resumed", "hung_up", *H2_COUNTS):
                setattr(self.conn, name, getattr(self.conn, name) + getattr(iv.connections, name))
            self.handshake.add_latencies(iv.connections.handshake_us)

    def connections(self) -> dict[str, Any] | None:
        """connections_opened etc. of a stream transport (None for UDP)."""
        if not self.streams:
            return None
        return {
            "opened": self.conn.opened,
            "errors": self.conn.errors,
            "tls_resumed": self.conn.resumed,
            "hung_up": self.conn.hung_up,
            **{name: getattr(self.conn, name) for name in H2_COUNTS},
            "handshake_ms": self.handshake.latency_ms(stddev=False),
        }

    def encoded_hists(self) -> dict[str, str]:
        """The latency histograms of each class and of `all` (soak.histogram's text form),
        those with queries only: the `lat_hist` fields of the windows added."""
        out = {n: c.hist.encode() for n, c in zip(self.names, self.classes, strict=True)}
        out["all"] = self.all.hist.encode()
        return {name: text for name, text in out.items() if text}

    def fields(self) -> Any:
        """The `load` fields of the windows added, per class and `all`."""
        seconds = self.seconds
        out = {
            name: stats.fields(seconds)
            for name, stats in zip(self.names, self.classes, strict=True)
        }
        out["all"] = self.all.fields(seconds)
        if self.streams:
            out["all"]["connections_opened"] = self.conn.opened
            out["all"]["connection_errors"] = self.conn.errors
            out["all"]["tls_resumed"] = self.conn.resumed
            out["all"]["connections_hung_up"] = self.conn.hung_up
            hs = self.handshake.latency_ms(stddev=False)
            for key in ("p50", "p95", "p99", "max"):
                value = hs[key]
                if value is not None:
                    out["all"][f"handshake_{key}_ms"] = value
        return out


@dataclass
class LoadResult:
    """A whole run (or a run so far), in the shape both engines report."""

    engine: str
    duration_s: float
    target_rate: float
    sent: int
    completed: int
    lost: int
    late: int
    rcodes: dict[str, int]
    latency_ms: dict[str, float | None]
    generator_bound: bool
    classes: dict[str, dict[str, Any]]
    skipped: int = 0
    unexpected: int = 0
    notes: list[str] = field(default_factory=list)
    connections: dict[str, Any] | None = None  # TCP, DoT, DoH: see MixStats.connections
    abandoned: int = 0  # queries in flight on connections hung up on purpose (streams)
    due: int = 0  # the schedule's queries (sent + never sent)
    refused: int = 0  # ICMP errors (connection refused) met; their queries are lost
    engine_counters: dict[str, int] | None = None  # SocketCounts.as_dict

    @property
    def achieved_rate(self) -> float:
        return self.sent / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def qps(self) -> float:
        return self.completed / self.duration_s if self.duration_s > 0 else 0.0

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "duration_s": round(self.duration_s, 3),
            "due": self.due,
            "skipped": self.skipped,
            "refused": self.refused,
            "target_rate": self.target_rate,
            "achieved_rate": round(self.achieved_rate, 2),
            "qps": round(self.qps, 2),
            "sent": self.sent,
            "completed": self.completed,
            "lost": self.lost,
            "late": self.late,
            "rcodes": self.rcodes,
            "latency_ms": self.latency_ms,
            "generator_bound": self.generator_bound,
            "classes": self.classes,
            **({"abandoned": self.abandoned} if self.connections is not None else {}),
            **({"connections": self.connections} if self.connections is not None else {}),
            **({"engine_counters": self.engine_counters} if self.engine_counters else {}),
        }


def is_generator_bound(target_rate: float, sent: int, duration_s: float, skipped: int) -> bool:
    """True when the generator could not keep the open-loop rate (rate 0 never is)."""
    if target_rate <= 0 or duration_s <= 0:
        return False
    return skipped > 0 or sent < 0.995 * target_rate * duration_s - 1


def refused_note(refused: int, lost: int) -> str:
    """The cause of losses when the target's port refused them (ICMP port unreachable)."""
    return (
        f"{refused} ICMP errors (connection refused: nothing listening on the port);"
        f" the {lost} queries without an answer are counted lost"
    )


def result_from(
    stats: MixStats, engine: str, duration_s: float, target_rate: float, *, stddev: bool = True
) -> LoadResult:
    """`stddev=False` for frequent reads (a live status): it walks every bucket."""
    total = stats.all
    notes = []
    if stats.unexpected:
        notes.append(f"{stats.unexpected} replies matched no outstanding query (ignored)")
    if stats.socket_errors:
        notes.append(refused_note(stats.socket_errors, total.lost))
    if stats.skipped:
        notes.append(f"{stats.skipped} due queries dropped: the generator fell > 1 s behind")
    behind = stats.skipped > 0 or (target_rate > 0 and total.sent < 0.995 * total.due)
    return LoadResult(
        engine=engine,
        duration_s=duration_s,
        target_rate=target_rate,
        sent=total.sent,
        completed=total.completed,
        lost=total.lost,
        late=total.late,
        rcodes=total.rcode_counts(),
        latency_ms=total.latency_ms(stddev=stddev),
        generator_bound=behind,
        classes={
            n: s.summary(stddev=stddev) for n, s in zip(stats.names, stats.classes, strict=True)
        },
        skipped=total.skipped,
        unexpected=stats.unexpected,
        notes=notes,
        connections=stats.connections(),
        abandoned=total.abandoned,
        due=total.due,
        refused=stats.socket_errors,
        engine_counters=stats.sockets.as_dict(),
    )
