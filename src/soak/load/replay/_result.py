"""What a replay reports (soak.load.replay._loop): its result, the send-time offsets it
keeps as counts, and the text summary `soak load --replay` prints (docs/replay.md)."""

from __future__ import annotations

import array
import collections
from dataclasses import dataclass
from typing import Any

from soak.histogram import LatencyHistogram, merged
from soak.load.ledger import ClassWindow
from soak.words import loops_text


@dataclass
class ReplayResult:
    classes: list[str]
    per_class: list[ClassWindow]  # the closed windows summed
    windows: int  # how many seconds closed
    problems: list[str]  # ledger invariants broken (the first MAX_PROBLEMS)
    loops: float  # the capture played: queries due over its queries (2.67: two and 2/3)
    queries_per_loop: int
    clients: int
    speed: float
    rate_qps: float
    duration_s: float
    sent_per_client: list[int]
    lost_per_client: list[int]  # the same losses as the ledger's, by client
    offset_us: dict[str, float]  # p50, p99, max of the send time after the planned one
    generator_bound: bool
    connections: dict[str, int]
    unexpected: int
    late: int  # replies after their timeout (their queries counted lost)
    fds_peak: int  # client sockets open at once, at most
    hists: list[LatencyHistogram]  # per class, the closed windows' latencies
    # The sockets' own counts (socket_sent, socket_received, send_failed), apart from
    # the ledger: sent = socket_sent + send_failed, completed <= socket_received.
    engine_counters: dict[str, int]

    def latency_ms(self) -> dict[str, float | None]:
        """The whole replay's quantiles: the classes' histograms merged."""
        return merged(self.hists).latency_ms()

    @property
    def clients_all_lost(self) -> int:
        """Clients that sent and had every query lost: a server that holds fewer clients
        or connections than the capture has (its TCP slots, a rate limit per client)."""
        pairs = zip(self.sent_per_client, self.lost_per_client, strict=True)
        return sum(1 for sent, lost in pairs if sent and lost == sent)

    def as_dict(self) -> dict[str, Any]:
        per = self.per_class
        total = ClassWindow()
        for cw in per:
            total.add(cw)
        counts = ("due", "sent", "skipped", "completed", "lost", "abandoned")
        return {
            "engine": "replay",
            **{k: getattr(total, k) for k in counts},
            "latency_ms": self.latency_ms(),
            "classes": {
                name: {**{k: getattr(cw, k) for k in counts}, "latency_ms": h.latency_ms()}
                for name, cw, h in zip(self.classes, per, self.hists, strict=True)
            },
            "rcodes": total.rcodes,
            "loops": round(self.loops, 4),
            "queries_per_loop": self.queries_per_loop,
            "clients": self.clients,
            "speed": round(self.speed, 6),
            "rate_qps": round(self.rate_qps, 3),
            "duration_s": round(self.duration_s, 3),
            "send_offset_us": self.offset_us,
            "generator_bound": self.generator_bound,
            "connections": self.connections,
            "unexpected": self.unexpected,
            "late": self.late,
            "client_sockets_peak": self.fds_peak,
            "engine_counters": self.engine_counters,
            "sent_per_client": self.sent_per_client,
            "lost_per_client": self.lost_per_client,
            "clients_all_lost": self.clients_all_lost,
            "windows": self.windows,
            "problems": self.problems,
        }


def three_digits(us: int) -> int:
    """Exact below 1 ms, three significant digits above: a histogram keyed by it stays
    small however long the replay and however spread the values (a day of whole-µs
    latencies on a busy machine would hold a key for every µs of the tail)."""
    if us < 1000:
        return us
    scale = 10 ** (len(str(us)) - 3)
    return us // scale * scale


def _quantiles(counts: list[tuple[int, int]], max_us: int) -> dict[str, float]:
    """p50, p99 (the value reached by that share of the counts) and max of `counts`,
    (value µs, count) pairs in rising order of value."""
    n = sum(c for _, c in counts)
    if not n:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    out: dict[str, float] = {}
    want = [("p50", 0.5), ("p99", 0.99)]
    seen = 0
    for us, c in counts:
        seen += c
        while want and seen >= want[0][1] * n:
            out[want.pop(0)[0]] = float(us)
    out["max"] = float(max_us)
    return out


class Offsets:
    """Send-time offsets (µs after the planned time) as counts per value: a second's or
    a window's, few values, dropped when handed out."""

    def __init__(self) -> None:
        self.counts: collections.Counter[int] = collections.Counter()

    def add(self, us: int) -> None:
        self.counts[three_digits(us)] += 1

    def merge(self, other: Offsets) -> None:
        self.counts.update(other.counts)

    def quantiles(self) -> dict[str, float]:
        return _quantiles(sorted(self.counts.items()), max(self.counts, default=0))


# The whole replay's histogram: a bucket per value three_digits keeps from 0 to 1,000 s
# (exact below 1 ms, then 900 a decade), allocated once, so that a replay of days holds
# the same memory at its end as after its first second; later offsets share the last
# bucket, and the max is kept beside it.
_EXACT_US = 1000
_DECADES = 6
_BUCKETS = _EXACT_US + 900 * _DECADES


def _bucket(us: int) -> int:
    if us < _EXACT_US:
        return us
    digits = len(str(us)) - 3  # 1 for 1,000-9,999 µs
    if digits > _DECADES:
        return _BUCKETS - 1
    return _EXACT_US + (digits - 1) * 900 + us // 10**digits - 100


def _bucket_us(index: int) -> int:
    if index < _EXACT_US:
        return index
    decade, step = divmod(index - _EXACT_US, 900)
    return (step + 100) * 10 ** (decade + 1)


class OffsetTotals:
    """A replay's send-time offsets (µs after the planned time): the whole run's, in a
    fixed-size histogram, and, where a soak run takes them window by window (take()),
    each due second's."""

    def __init__(self) -> None:
        self._counts = array.array("Q", bytes(8 * _BUCKETS))
        self.max_us = 0
        # None for `soak load --replay`, which reports the whole run only.
        self.by_second: dict[int, Offsets] | None = None

    def add(self, us: int, second: int | None = None, n: int = 1) -> None:
        us = three_digits(max(us, 0))  # never early: a clock stepped back is on time
        self._counts[_bucket(us)] += n
        self.max_us = max(self.max_us, us)  # as the windows' (three digits)
        if self.by_second is not None and second is not None:
            self.by_second.setdefault(second, Offsets()).counts[us] += n

    def add_window(self, second: int, counts: dict[int, int]) -> None:
        """A window's offsets counted elsewhere (the compiled loop, soak.load.replay._engine;
        a worker process's, _workers):
        {µs: how many}, each µs a value three_digits keeps."""
        for us, n in counts.items():
            self._counts[_bucket(us)] += n
        self.max_us = max(self.max_us, max(counts, default=0))
        if self.by_second is not None and counts:
            self.by_second.setdefault(second, Offsets()).counts.update(counts)

    def take(self, second: int) -> Offsets:
        """The offsets of the queries due in `second` (empty if none was sent), forgotten."""
        found = None if self.by_second is None else self.by_second.pop(second, None)
        return found if found is not None else Offsets()

    def buckets_used(self) -> int:
        return sum(1 for c in self._counts if c)

    def quantiles(self) -> dict[str, float]:
        used = [(_bucket_us(i), c) for i, c in enumerate(self._counts) if c]
        return _quantiles(used, self.max_us)


def format_replay(r: ReplayResult, server: str) -> str:
    """The text summary of a replay (the counts are the ledger's, summed)."""
    d = r.as_dict()
    lines = [
        f"Replay against {server}: {r.clients} clients, {loops_text(r.loops)} of"
        f" {r.queries_per_loop:,} queries at {r.speed:.3g}x"
        f" ({r.rate_qps:.1f} q/s planned), {r.duration_s:.3f} s",
        "",
        f"  Queries due:          {d['due']}",
        f"  Queries sent:         {d['sent']} (skipped {d['skipped']})",
        f"  Queries completed:    {d['completed']}",
        f"  Queries lost:         {d['lost']} (late replies {d['late']})",
        f"  Queries abandoned:    {d['abandoned']}",
        f"  Latency (ms):         {_latency_text(d['latency_ms'])}",
        f"  Send offset (µs):     p50 {r.offset_us['p50']:.0f} p99 {r.offset_us['p99']:.0f}"
        f" max {r.offset_us['max']:.0f} (after the capture's timing)",
        "  Connections:          "
        + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in r.connections.items())
        + f" (client sockets at once, at most {r.fds_peak})",
        "",
        "Classes:",
    ]
    for name, c in d["classes"].items():
        lines.append(
            f"  {name:<12} due {c['due']} sent {c['sent']} completed {c['completed']}"
            f" lost {c['lost']} abandoned {c['abandoned']}; {_latency_text(c['latency_ms'])}"
        )
    answered_some = r.clients - r.clients_all_lost - r.sent_per_client.count(0)
    if r.clients_all_lost and answered_some:
        lines += [
            "",
            f"Clients with every query lost: {r.clients_all_lost} of {r.clients}, while it"
            f" answered {answered_some}: a limit on its connections or clients? (lost per"
            " client: --json, lost_per_client)",
        ]
    if r.generator_bound:
        lines += [
            "",
            "Generator-bound: the replay could not keep the capture's timing"
            f" (send offset p99 {r.offset_us['p99']:.0f} µs, skipped {d['skipped']});"
            " the server's figures are partly the generator's.",
        ]
    return "\n".join(lines)


def _latency_text(lat: dict[str, float | None]) -> str:
    """ "p50 0.215 p99 1.02 max 3.4 ms", or "no answers"."""
    if lat.get("p50") is None:
        return "no answers"
    return " ".join(f"{q} {lat[q]:.3g}" for q in ("p50", "p99", "max")) + " ms"
