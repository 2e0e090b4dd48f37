"""The report's "Versions" section: a soak across an upgrade's segments side by side,
each later version against the one before it (`soak compare`'s statistics), and each
swap's checklist as cases. Built from report.json's `segments` (soak.report.segments)."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from soak.report.tables import DASH, Row, num, offset, per_hour

Table = tuple[str, Row, list[Row]]


def _lost(load: dict[str, Any]) -> str:
    sent, lost = load.get("sent") or 0, load.get("lost") or 0
    return f"{num(lost)} ({100.0 * lost / sent:.3g}%)" if sent else num(lost)


def _leak(segment: dict[str, Any], resource: str) -> str:
    for v in segment["leaks"]:
        if v["resource"] == resource:
            return f"{v['verdict']} {per_hour(resource, v.get('slope_per_hour'))}"
    return DASH


def _checks(segment: dict[str, Any]) -> str:
    cases = segment["cases"]
    if not cases:
        return DASH
    passed = sum(1 for c in cases if c["status"] == "pass")
    return f"{passed} of {len(cases)} passed"


def _swap(segment: dict[str, Any]) -> str:
    swap = segment.get("swap")
    if not swap:
        return DASH
    ready = f"ready {swap['ready_s']:.2f} s after the stop" if swap.get("ready_s") else "not ready"
    lost = f"{num(swap['lost'])} of {num(swap['sent'])} lost in {swap['seconds']} s"
    return f"{ready}; {lost} ({num(swap['refused'])} refused)"


def side_by_side(segments: list[dict[str, Any]]) -> Table:
    header = ["", *(s["version"] or f"version {i + 1}" for i, s in enumerate(segments))]
    rows: list[Row] = [
        ["seconds", *(f"{offset(s['start_s'])} to {offset(s['end_s'])}" for s in segments)],
        *(
            [name, *(num(s["load"].get(name)) for s in segments)]
            for name in ("due", "sent", "completed")
        ),
        ["lost", *(_lost(s["load"]) for s in segments)],
        ["p50 latency (ms)", *(num(s["load"].get("p50_ms")) for s in segments)],
        ["p99 latency (ms)", *(num(s["load"].get("p99_ms")) for s in segments)],
    ]
    resources = sorted({v["resource"] for s in segments for v in s["leaks"]})
    rows += [[f"leak: {r}", *(_leak(s, r) for s in segments)] for r in resources]
    rows.append(["its swap", *(_swap(s) for s in segments)])
    rows.append(["its swap's checks", *(_checks(s) for s in segments)])
    return "Versions side by side", header, rows


def _interval(ci: Any) -> str:
    if not isinstance(ci, list | tuple) or len(ci) != 2:
        return DASH
    return f"{ci[0]:+.3g}% to {ci[1]:+.3g}%"


def _verdict(row: dict[str, Any]) -> str:
    note = row.get("note")
    return f"{row['verdict']} ({note})" if note else str(row["verdict"])


def compared(before: dict[str, Any], after: dict[str, Any]) -> Table:
    title = f"{after['version']} against {before['version']}"
    header = ["figure", before["version"], after["version"], "difference", "95% interval"]
    header += ["p (Holm)", "verdict"]
    rows = [
        [
            f"{r['name']} ({r['unit']})" if r["unit"] else r["name"],
            num(r["a"]),
            num(r["b"]),
            f"{r['diff_pct']:+.3g}%" if isinstance(r["diff_pct"], int | float) else DASH,
            _interval(r.get("ci_pct")),
            num(r.get("p_adjusted"), 2),
            _verdict(r),
        ]
        for r in after["compared"]
    ]
    return title, header, rows


def cases(segment: dict[str, Any]) -> Table:
    rows = [[c["name"], c["kind"], c["status"], c["message"]] for c in segment["cases"]]
    move = "Rollback" if segment.get("rollback") else "Swap"
    return f"{move} to {segment['version']}: checks", ["check", "kind", "result", "said"], rows


def segment_tables(report: dict[str, Any]) -> list[Table]:
    """Every table of the section; none for a run of one version."""
    segments = report.get("segments") or []
    if len(segments) < 2:
        return []
    out = [side_by_side(segments)]
    for before, after in pairwise(segments):
        if after["compared"]:
            out.append(compared(before, after))
        if after["cases"]:
            out.append(cases(after))
    return out
