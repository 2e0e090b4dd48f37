"""Witnesses of a run's ledger that the ledger did not compute.

The audit's other checks (soak.report.audit) hold every table against the ledger's
windows; a second copy of those windows would agree with itself whatever they said.
These hold the ledger against what did not come from it:

- the schedule: each phase was due its rate times its seconds (the scenario and the run's
  clock), the seconds the service was away included: a window missing, doubled or taken
  out of the store changes the ledger's due, not the schedule's;
- the server's own count of the queries it received (`server_queries`: unbound's remote
  control, BIND's statistics channel, pdns-auth's API statistics, pdns-recursor's
  `questions`, knot-resolver's `request_total`, refdns's
  `refdns_queries_total`): at its newest
  sample it has received every query answered by then, and no more than were sent by
  then, besides the probes and readiness queries soak sent itself (a share allowed);
  and so the client queries the server wrote as dnstap, where the run captured them
  (result.json `capture.counted`, from the run's origin to the capture's end);

- the engine's own counters (result.json's `engine_counters`, soak.load.stats.SocketCounts):
  what each loop's sockets took (sendmmsg, send) and read (recvmmsg, recv), counted at
  the calls and kept apart from the windows: every query the ledger has sent was taken
  by a socket (or counted sent after the socket refused it twice, `send_failed`; for
  TCP, DoT and DoH: taken means written whole, its last byte taken by the socket, and
  a query queued on a connection that broke first, or due while none was up, failed), and
  the ledger has no more answers than the sockets read (which include late, duplicate
  and stray replies: the difference is said);
- quantiles: the phases partition the run's windows and the classes the judged ones, and
  a quantile of a mixture lies between its parts' (each a quantile of merged histograms,
  bucket tops alike): result.json's whole-run p99 and mean within the phases' range, the
  classes table's `all` row within its classes'.

A disagreement is a line of text, as the audit's own. Pure: windows and samples in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from soak.clock import NS_PER_S

# A due second's queries are all answered or timed out this long after it ends.
_SETTLED_S = 3
# A sample carries its tick's time but is read after it (later still on a busy machine):
# queries sent this long after the tick may be in the count.
_READ_LAG_S = 5
# The server also counts soak's probes and readiness queries: a share of what was sent,
# and a few besides.
_SERVER_EXTRA_SHARE = 0.02
_SERVER_EXTRA_MIN = 200


@dataclass(frozen=True, slots=True)
class Window:
    time_ns: int  # the due second's start
    sent: float
    completed: float


@dataclass(frozen=True, slots=True)
class ScheduledPhase:
    name: str
    rate_qps: float | None  # None: flat out (nothing is scheduled)
    duration_s: float  # as the scenario (and --duration) gave it


def scheduled_due(schedule: Sequence[ScheduledPhase], lo_s: float, hi_s: float) -> float | None:
    """The queries the phases' rates put in [lo_s, hi_s) (seconds after the origin): the
    integral of the rate; None where a flat-out phase lies in it (nothing scheduled)."""
    due, start_s = 0.0, 0.0
    for phase in schedule:
        end_s = start_s + phase.duration_s
        overlap_s = min(hi_s, end_s) - max(lo_s, start_s)
        if overlap_s > 0:
            if phase.rate_qps is None:
                return None
            due += phase.rate_qps * overlap_s
        start_s = end_s
    return due


def schedule_disagreements(
    report: Mapping[str, Any], schedule: Sequence[ScheduledPhase]
) -> list[str]:
    """Each phase's due against its rate times its scheduled seconds, for the phases that
    ran their whole length (one cut short by a stop, or still going, is not held to it).

    A phase holds the windows stamped in (its start, its end] (soak.report.build): those
    of the seconds from floor(start) to floor(end), the run's last phase also the second
    its end cuts. Where a phase starts or ends mid-second (a scaled scenario), the
    second across the boundary is due at both phases' rates and held by the later one:
    what is expected is the rate over exactly those seconds."""
    out = []
    rows = {row.get("name"): row for row in report.get("phases", [])}
    start_s = 0.0
    for i, phase in enumerate(schedule):
        end_s = start_s + phase.duration_s
        row = rows.get(phase.name)
        lo_s, hi_s = math.floor(start_s), end_s if i == len(schedule) - 1 else math.floor(end_s)
        start_s = end_s
        want = scheduled_due(schedule, lo_s, hi_s)
        if phase.rate_qps is None or row is None or want is None:
            continue
        due = row.get("metrics", {}).get("due")
        ran_s = row.get("duration_s")
        if not isinstance(due, int | float) or not isinstance(ran_s, int | float):
            continue
        if ran_s < phase.duration_s - 0.5:
            continue  # cut short (a stop) or still going: its seconds end mid-second
        # The engine counts whole queries (each boundary rounds by one at most): half a
        # second's worth is already a disagreement (a window dropped or doubled).
        if abs(due - want) > 0.5 * phase.rate_qps + 2:
            out.append(
                f"phase {phase.name}: due {due:,.0f} != its schedule {want:,.0f}"
                f" ({phase.rate_qps:g} q/s over {hi_s - lo_s:g} s)"
            )
    return out


def _sent_and_answered(windows: Iterable[Window], at_ns: int) -> tuple[float, float]:
    """What a count taken at `at_ns` may hold at most (sent up to the read lag after it)
    and must hold at least (answered in the seconds settled by then)."""
    sent = answered = 0.0
    for w in windows:
        if w.time_ns < at_ns + _READ_LAG_S * NS_PER_S:
            sent += w.sent
        if w.time_ns + (1 + _SETTLED_S) * NS_PER_S <= at_ns:
            answered += w.completed
    return sent, answered


def server_disagreements(
    windows: Iterable[Window], server: Sequence[tuple[int, float]], who: str = "the server"
) -> list[str]:
    """The server's own count (its samples: time, queries received since it started)
    against the ledger's windows up to its newest sample."""
    if not server:
        return []
    at_ns, counted = server[-1]
    sent, answered = _sent_and_answered(windows, at_ns)
    extra = max(_SERVER_EXTRA_MIN, _SERVER_EXTRA_SHARE * sent)
    if counted < answered:
        return [
            f"{who} counted {counted:,.0f} queries, fewer than the {answered:,.0f}"
            " the ledger has answered by then"
        ]
    if counted > sent + extra:
        return [
            f"{who} counted {counted:,.0f} queries, more than the {sent:,.0f}"
            f" the ledger has sent by then (and {extra:,.0f} probes besides)"
        ]
    return []


def capture_count(capture: Mapping[str, Any] | None) -> list[tuple[int, float]]:
    """A dnstap capture's count of the client queries the server wrote from the run's
    origin, as one sample at its span's end (result.json `capture.counted`; [] without)."""
    counted = (capture or {}).get("counted")
    if not isinstance(counted, Mapping):
        return []
    n, until_ns = counted.get("client_queries"), counted.get("until_ns")
    if not isinstance(n, int | float) or not isinstance(until_ns, int):
        return []
    return [(until_ns, float(n))]


CAPTURE = "the dnstap capture"


def capture_disagreements(
    windows: Iterable[Window], capture: Mapping[str, Any] | None
) -> list[str]:
    """The client queries the server wrote as dnstap (the run's capture) against the
    ledger, as the server's own count is: at least every query answered, no more than
    were sent besides the probes (the share the server's count is allowed)."""
    return server_disagreements(windows, capture_count(capture), CAPTURE)


# What a server's count holds besides the load's queries sent before its sample.
SERVER_BESIDES = "probes, readiness queries and those sent while its sample was read"
CAPTURE_BESIDES = "probes"


def server_count_words(
    windows: Iterable[Window],
    server: Sequence[tuple[int, float]],
    who: str = "the server",
    besides: str = SERVER_BESIDES,
) -> str:
    """ "the server counted N of the M queries sent by its last sample (K besides: probes,
    readiness queries ...)"; "" without a sample."""
    if not server:
        return ""
    at_ns, counted = server[-1]
    sent = sum(w.sent for w in windows if w.time_ns < at_ns)
    line = f"{who} counted {min(counted, sent):,.0f} of the {sent:,.0f} queries sent"
    if counted > sent:
        line += f" ({counted - sent:,.0f} besides: {besides})"
    return line


# Figures are rounded to the µs (3 decimals of a ms) where they are written.
_QUANTILE_SLACK_MS = 0.0015


def _outside(what: str, whole: object, parts: Iterable[object]) -> list[str]:
    """A whole's quantile lies within its parts' (a mixture's quantile cannot leave the
    range of its components'), but only every part bounds it: a part shown without the
    figure (too few answers for a p99) may hold the whole's tail, and nothing is said."""
    given = list(parts)
    values = [float(v) for v in given if isinstance(v, int | float)]
    if not isinstance(whole, int | float) or not values or len(values) < len(given):
        return []
    lo, hi = min(values), max(values)
    if lo - _QUANTILE_SLACK_MS <= whole <= hi + _QUANTILE_SLACK_MS:
        return []
    return [f"{what} {whole:g} ms lies outside its parts' {lo:g} .. {hi:g} ms"]


def quantile_disagreements(
    report: Mapping[str, Any], load_totals: Mapping[str, Any] | None
) -> list[str]:
    """A whole's latency against its parts': the run's (result.json) against its phases,
    the classes table's `all` row against its classes."""
    out = []
    whole = (load_totals or {}).get("latency_ms") or {}
    phases = [row.get("metrics", {}) for row in report.get("phases", [])]
    p99s = [(m.get("lat_p99_ms") or {}).get("p99") for m in phases]
    out += _outside("result.json p99", whole.get("p99"), p99s)
    out += _outside(
        "result.json mean latency", whole.get("avg"), [m.get("lat_avg_ms") for m in phases]
    )
    # Each stored `all` window is the merge of its classes' (one sum of the window,
    # soak.load.generator.LoadRunner.window_parts), so the table's `all` is the mixture
    # of its class rows and its p99 lies within theirs.
    rows = {row.get("class"): row for row in report.get("classes", [])}
    if "all" in rows:
        parts = [row.get("p99_ms") for name, row in rows.items() if name != "all"]
        out += _outside("classes `all` p99", rows["all"].get("p99_ms"), parts)
    return out


def engine_counters_missing(load_totals: Mapping[str, Any] | None) -> str | None:
    """Why result.json has no socket counters to hold the ledger against (None: it has)."""
    totals = load_totals or {}
    if totals.get("engine_counters_lost"):  # a replay's process, an agent's totals
        return str(totals["engine_counters_lost"])
    # A replay's restart keeps every play's counts (they come back as each play ends
    # or is wound up) unless its process died: then engine_counters_lost says so.
    if totals.get("load_restarts") and "replay" not in totals:
        return "the load engine restarted: a dead worker's last counts died with it"
    if not isinstance(totals.get("engine_counters"), Mapping):
        return "result.json has no engine_counters (a run before them)"
    return None


def engine_disagreements(
    windows: Iterable[Window], load_totals: Mapping[str, Any] | None
) -> list[str]:
    """The ledger's windows from the engine's start on against its sockets' counts:
    sent equal to what the sockets took (and the refused counted sent), completed no
    more than the replies read. [] where there are no counters (engine_counters_missing)."""
    if engine_counters_missing(load_totals) is not None:
        return []
    counters = (load_totals or {})["engine_counters"]
    from_ns = counters.get("from_ns", 0)
    sent = completed = 0.0
    for w in windows:
        if w.time_ns > from_ns:  # stamped at its second's end
            sent += w.sent
            completed += w.completed
    took = counters.get("socket_sent", 0) + counters.get("send_failed", 0)
    received = counters.get("socket_received", 0)
    out = []
    if sent != took:
        out.append(
            f"the ledger's sent {sent:,.0f} != the {took:,.0f} queries its sockets took"
            f" ({counters.get('send_failed', 0):,} of them refused and counted sent)"
        )
    if completed > received:
        out.append(
            f"the ledger's completed {completed:,.0f} above the {received:,.0f} replies"
            " its sockets read"
        )
    return out


def engine_counter_words(windows: Iterable[Window], load_totals: Mapping[str, Any] | None) -> str:
    """ "the sockets took N queries and read M replies (K late, duplicate or stray)", or
    why the counters are not there."""
    missing = engine_counters_missing(load_totals)
    if missing is not None:
        return f"not witnessed by the engine's socket counters: {missing}"
    counters = (load_totals or {})["engine_counters"]
    from_ns = counters.get("from_ns", 0)
    completed = sum(w.completed for w in windows if w.time_ns > from_ns)
    received = counters.get("socket_received", 0)
    return (
        f"the engine's sockets took {counters.get('socket_sent', 0):,} queries and read"
        f" {received:,} replies ({received - completed:,.0f} late, duplicate or stray)"
    )
