"""The replay's flat out as the most it gets answered: a short rate search.

The replay is open-loop: asked for more than the server answers, it sends it all and
the server's queues hold the rest past the timeout (lost), so its answered q/s and CPU
per answer at a fixed asked rate measure the server's collapse as much as the replay.
dnsperf is closed-loop (at most -q outstanding) and never overloads the server. The
fair flat out for an open-loop generator is the highest asked rate at which (almost)
every query due is answered in time; bench/replay_vs_dnsperf.py --flat-out search finds
it here, in each round, from dnsperf's answered q/s of the same round.

The search: the first probe at `start_qps`; while every probe so far answered in time,
up by `factor`; while none did, down by `factor`; once one rate answered and a higher one
did not, the geometric middle of the two. At most `probes` probes (each a replay of
--duration seconds plus its start-up), so a round's search is bounded in time. Pure: the
probe is a callable, the judgment a function of the replay's own counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

Probe = dict  # a run_replay() row: due, completed, lost, skipped, cpu_ms_per_1k, ...


@dataclass(frozen=True)
class Search:
    """How far and how long a round's search goes."""

    factor: float = 1.25  # the step up or down while no bracket is found
    probes: int = 6  # at most this many replays a round
    miss_frac: float = 0.01  # unanswered (lost + skipped + abandoned) over due, at most
    max_qps: float = 100_000  # never asked more (--max-rate)
    close_ratio: float = 1.03  # a bracket this narrow ends the search early


def unanswered(x: Probe) -> int:
    """Queries due that got no answer in time: lost, skipped, abandoned at the end."""
    return int(x["due"]) - int(x["completed"])


def answered_in_time(x: Probe, miss_frac: float) -> bool:
    return int(x["due"]) > 0 and unanswered(x) <= miss_frac * int(x["due"])


def next_rate(tried: list[Probe], s: Search) -> float | None:
    """The next rate to ask, or None when the bracket is as narrow as it need be."""
    good = [x["rate_qps"] for x in tried if x["ok"]]
    bad = [x["rate_qps"] for x in tried if not x["ok"]]
    if good and bad:
        lo, hi = max(good), min(bad)
        if hi <= lo or hi / lo <= s.close_ratio:  # noise crossed them, or close enough
            return None
        return math.sqrt(lo * hi)
    if good:
        top = max(good)
        return None if top >= s.max_qps else min(top * s.factor, s.max_qps)
    return min(bad) / s.factor


def rate_of(x: Probe) -> float:
    return float(x["rate_qps"])


def search_rate(
    probe: Callable[[float], Probe], start_qps: float, s: Search
) -> tuple[Probe, list[Probe]]:
    """(the probe at the highest rate answered in time, every probe in order).

    With none answered in time, the lowest rate's probe, its `ok` False: the caller
    says so rather than report it as the flat out."""
    tried: list[Probe] = []
    rate: float | None = max(1.0, min(start_qps, s.max_qps))
    while rate is not None and len(tried) < s.probes:
        x = probe(round(rate))
        x["rate_qps"] = round(rate)
        x["ok"] = answered_in_time(x, s.miss_frac)
        tried.append(x)
        rate = next_rate(tried, s)
    good = [x for x in tried if x["ok"]]
    best = max(good or [min(tried, key=rate_of)], key=rate_of)
    best["at_cap"] = best["ok"] and best["rate_qps"] >= s.max_qps  # the cap's, not the limit
    return best, tried


def probe_line(k: int, name: str, x: Probe) -> str:
    return (
        f"  round {k} {name} probe: asked {x['rate_qps']:.0f} q/s, answered"
        f" {x['answered_qps']:.0f} q/s, lost {x['lost']}, skipped {x['skipped']},"
        f" abandoned {x['abandoned']}, of {x['due']} due"
        f" ({'within' if x['ok'] else 'beyond'} the bound),"
        f" CPU {x['cpu_ms_per_1k']:.1f} ms/1k"
    )


def searched_line(k: int, name: str, x: Probe, dnsperf: Probe, probes: int) -> str:
    """A round's result: the searched rate's figures and their ratios to dnsperf's."""
    ratio_qps = x["answered_qps"] / dnsperf["answered_qps"]
    ratio_cpu = x["cpu_ms_per_1k"] / dnsperf["cpu_ms_per_1k"]
    found = "searched" if x["ok"] else "none within the bound, lowest"
    found += " (at --max-rate)" if x["at_cap"] else ""
    return (
        f"  round {k} {name} {found}: rate {x['rate_qps']:.0f} q/s, answered"
        f" {x['answered_qps']:.0f} q/s, CPU {x['cpu_ms_per_1k']:.1f} ms/1k; dnsperf"
        f" {dnsperf['answered_qps']:.0f} q/s, {dnsperf['cpu_ms_per_1k']:.1f} ms/1k"
        f" (lost {dnsperf['lost_pct']:.1f}% of its sent);"
        f" ratio q/s {ratio_qps:.2f}, CPU per answer {ratio_cpu:.2f}; probes {probes}"
    )
