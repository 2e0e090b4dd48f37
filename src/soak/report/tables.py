"""The report's tables as rows of strings, shared by the HTML and Markdown renderings."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from soak.analysis.judged import NOT_YET

MiB = 1024**2

Row = list[str]
DASH = "\u2013"  # an en dash: no figure


def num(v: Any, digits: int = 3) -> str:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return DASH
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def mib(v: Any) -> str:
    return DASH if not isinstance(v, int | float) else f"{v / MiB:,.1f} MiB"


def duration(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return DASH
    s = round(seconds)
    if s < 60:
        return f"{seconds:.1f} s"
    h, m, sec = s // 3600, s // 60 % 60, s % 60
    return f"{h} h {m:02d} min" if h else f"{m} min {sec:02d} s"


def offset(seconds: Any, *, tenths: bool = False) -> str:
    """+h:mm:ss from the run's start; `tenths`: a boundary that is not on a whole second
    keeps its tenths (a 2.5-s warm-up ends at +0:00:02.5, not +0:00:02)."""
    t = max(0.0, float(seconds)) if isinstance(seconds, int | float) else 0.0
    s = int(t) if tenths else round(t)
    text = f"+{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
    rest = round(t - s, 1) if tenths else 0.0
    if rest >= 1.0:  # 2.97 s: +0:00:03, not +0:00:02.10
        return offset(s + 1)
    return text + f"{rest:.1f}".removeprefix("0") if rest > 0 else text


def per_hour(resource: str, v: Any) -> str:
    if not isinstance(v, int | float):
        return DASH
    if resource.endswith("_bytes"):
        return f"{v / MiB:+.3g} MiB/h"
    return f"{v:+.3g}/h"


def _range(fmt: Callable[[Any], str]) -> Callable[[Any], str]:
    def show(v: Any) -> str:
        if not isinstance(v, dict):
            return DASH
        lo, hi = fmt(v.get("min")), fmt(v.get("max"))
        return lo if lo == hi else f"{lo} {DASH} {hi}"

    return show


def _last_max(fmt: Callable[[Any], str]) -> Callable[[Any], str]:
    def show(v: Any) -> str:
        if not isinstance(v, dict):
            return DASH
        return f"{fmt(v.get('last'))} (max {fmt(v.get('max'))})"

    return show


def _lost(metrics: dict[str, Any]) -> str:
    lost, sent = metrics.get("lost"), metrics.get("sent")
    if not isinstance(lost, int | float):
        return DASH
    ratio = f" ({lost / sent:.3%})" if isinstance(sent, int | float) and sent else ""
    return f"{lost:,.0f}{ratio}"


def _p99(v: Any) -> str:
    if not isinstance(v, dict):
        return DASH
    if "p99" in v:
        return f"{num(v['p99'])} (slowest second {num(v.get('max'))})"
    return f"{num(v.get('mean'))} (max {num(v.get('max'))})"


# (row label, how to show it from a phase's metrics)
PHASE_ROWS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("Rate target, q/s", lambda m: num(m.get("rate_target_qps"), 4)),
    ("Rate achieved, q/s", lambda m: num(m.get("rate_achieved_qps"), 4)),
    ("Queries due", lambda m: num(m.get("due"))),
    ("Queries sent", lambda m: num(m.get("sent"))),
    ("Completed", lambda m: num(m.get("completed"))),
    ("Lost", _lost),
    ("Abandoned", lambda m: num(m.get("abandoned"))),
    ("Wrong answers", lambda m: num(m.get("wrong_answers"))),
    ("Latency avg, ms", lambda m: num(m.get("lat_avg_ms"))),
    ("Latency p99, ms", lambda m: _p99(m.get("lat_p99_ms"))),
    ("Replay send offset p50, µs", lambda m: _p99(m.get("send_offset_p50_us"))),
    ("Replay send offset p99, µs", lambda m: _p99(m.get("send_offset_p99_us"))),
    ("Replay send offset max, µs", lambda m: _p99(m.get("send_offset_max_us"))),
    ("Replay connections opened", lambda m: num(m.get("conn_opened"))),
    ("Replay queries on an open connection", lambda m: num(m.get("conn_reused"))),
    ("Replay connections closed idle", lambda m: num(m.get("conn_idled_out"))),
    ("CPU, cores", lambda m: num(m.get("cpu_cores"))),
    ("RSS anonymous, end", lambda m: _last_max(mib)(m.get("rss_anon_bytes"))),
    ("RSS file-backed, end", lambda m: _last_max(mib)(m.get("rss_file_bytes"))),
    ("Heap in use", lambda m: _range(mib)(m.get("heap_inuse_bytes"))),
    ("Open fds", lambda m: _range(num)(m.get("fds"))),
    ("Goroutines", lambda m: _range(num)(m.get("goroutines"))),
    ("Threads", lambda m: _range(num)(m.get("threads"))),
    ("Query-log drops", lambda m: num(m.get("querylog_dropped"))),
]


def phase_table(report: dict[str, Any]) -> tuple[Row, list[Row]]:
    """Header (the phases) and one row per figure; rows with no figure at all are left out."""
    phases = report["phases"]
    header = [""] + [p["name"] + (" (warm-up)" if p.get("warmup") else "") for p in phases]
    rows: list[Row] = [["Duration"] + [duration(p.get("duration_s")) for p in phases]]
    for label, show in PHASE_ROWS:
        cells = [show(p["metrics"]) for p in phases]
        if any(c != DASH for c in cells):
            rows.append([label, *cells])
    return header, rows


def accounting_note(report: dict[str, Any]) -> str:
    """How the warm-up is counted, said once for every table and figure."""
    judged = report.get("judged_from_s") or 0
    if judged <= 0:
        return "Every table counts every tick of the run (no warm-up)."
    return (
        f"The warm-up (to {offset(judged, tenths=True)}) is shown in its own column;"
        " the criteria and the"
        " per-class table count the ticks after it, so their sent, completed and lost are the"
        " sums of the other phases' columns."
    )


def class_rows(report: dict[str, Any]) -> tuple[Row, list[Row]]:
    """Per load class, over the ticks the criteria judge."""
    header = ["Class", "Sent", "Completed", "Lost", "p50, ms", "p99, ms", "Rcodes", "Wrong"]
    rows = []
    for c in report.get("classes", []):
        rcodes = ", ".join(f"{k} {v:,.0f}" for k, v in c["rcodes"].items()) or DASH
        lost = _lost(c)
        abandoned = c.get("abandoned")
        if isinstance(abandoned, int | float) and abandoned:
            lost += f", {abandoned:,.0f} abandoned"
        rows.append(
            [
                c["class"],
                num(c["sent"]),
                num(c["completed"]),
                lost,
                num(c["p50_ms"]),
                num(c["p99_ms"]),
                rcodes,
                num(c["wrong_answers"]),
            ]
        )
    return header, rows


def agent_rows(report: dict[str, Any]) -> tuple[Row, list[Row]]:
    """Per load agent, over the ticks the criteria judge (the class table's `all` row is
    their sum)."""
    header = ["Agent", "Sent", "Share", "Completed", "Lost", "p50, ms", "p99, ms", "Rcodes"]
    rows = []
    for a in report.get("agents", []):
        rcodes = ", ".join(f"{k} {v:,.0f}" for k, v in a["rcodes"].items()) or DASH
        share = a.get("share")
        rows.append(
            [
                a["agent"],
                num(a["sent"]),
                f"{share:.1%}" if isinstance(share, int | float) else DASH,
                num(a["completed"]),
                _lost(a),
                num(a["p50_ms"]),
                num(a["p99_ms"]),
                rcodes,
            ]
        )
    return header, rows


def probe_rows(report: dict[str, Any]) -> tuple[Row, list[Row]]:
    header = ["Probe", "Answered as expected", "Slowest, ms"]
    rows = [
        [
            p["probe"],
            f"{p['ok']} of {p['total']}" + (f" ({p['ok'] / p['total']:.1%})" if p["total"] else ""),
            num(p["max_latency_ms"]),
        ]
        for p in report.get("probes", [])
    ]
    return header, rows


def criteria_rows(report: dict[str, Any]) -> tuple[Row, list[Row]]:
    header = ["Criterion", "Window", "Value", "Limit", "Result", "Detail"]
    rows = [
        [
            c["name"],
            c["window"],
            *_criterion_figures(c),
            _result(c),
            c["message"],
        ]
        for c in report["criteria"]
    ]
    return header, rows


def _result(c: dict[str, Any]) -> str:
    if not c.get("judged", True):
        return NOT_YET if c.get("why") == NOT_YET else "not judged"
    return "pass" if c["ok"] else "FAIL"


def _criterion_figures(c: dict[str, Any]) -> list[str]:
    """Value and limit in the criterion's unit: a leak's bytes per hour read as MiB/h."""
    name = c["name"]
    if not c.get("judged", True):  # a slope over too few windows is no figure
        c = {**c, "value": None}
    if name.startswith("leak[") and name.endswith("_bytes]"):
        return [per_hour("_bytes", c["value"]), per_hour("_bytes", c["limit"]).lstrip("+")]
    if name.startswith("leak["):
        return [per_hour("", c["value"]), per_hour("", c["limit"]).lstrip("+")]
    if name == "lost_ratio":
        return [_pct(c["value"]), _pct(c["limit"])]
    return [num(c["value"], 4), num(c["limit"], 4)]


def _pct(v: Any) -> str:
    return f"{v:.3%}" if isinstance(v, int | float) else DASH


def verdict_rows(report: dict[str, Any]) -> tuple[Row, list[Row]]:
    header = ["Resource", "Verdict", "Slope", "Threshold", "Recent slope", "p-value", "Windows"]
    header.append("Note")
    rows = [
        [
            v["resource"],
            "ok (whole run)" if _recent_above(v) else v["verdict"],
            per_hour(v["resource"], v["slope_per_hour"]),
            per_hour(v["resource"], v["threshold_per_hour"]).lstrip("+"),
            per_hour(v["resource"], v.get("recent_slope_per_hour")),
            f"{v['p_value']:.2g}" if isinstance(v.get("p_value"), int | float) else DASH,
            str(v["windows"]),
            _verdict_note(v),
        ]
        for v in report["verdicts"]
    ]
    culprits = (report.get("what_grew") or {}).get("culprits") or {}
    if culprits:  # beside each growing verdict: what grew and when it will hurt
        header += ["Culprit", "When it will hurt"]
        for v, row in zip(report["verdicts"], rows, strict=True):
            said = culprits.get(v["resource"], {})
            row += [said.get("culprit") or DASH, said.get("projection") or DASH]
    return header, rows


# Beside an `ok` whose recent slope is above the threshold: what the `ok` is of.
RECENT_ABOVE = (
    "the recent slope (the last third of the windows) is above the threshold, but the"
    " verdict is the whole run's trend: not above the threshold or not significant at"
    " leaks.p_value; the recent part is not judged on its own"
)


def _recent_above(v: dict[str, Any]) -> bool:
    recent, limit = v.get("recent_slope_per_hour"), v.get("threshold_per_hour")
    if not (isinstance(recent, int | float) and isinstance(limit, int | float)):
        return False
    return bool(v["verdict"] == "ok" and recent > limit)


def _verdict_note(v: dict[str, Any]) -> str:
    """The verdict's own note; for an `ok` beside a recent slope above its threshold, why."""
    note = str(v.get("note") or "")
    if _recent_above(v):
        return f"{RECENT_ABOVE}; {note}" if note else RECENT_ABOVE
    return note or DASH


def growth_tables(report: dict[str, Any]) -> list[tuple[str, Row, list[Row]]]:
    """(title, header, rows) of the "What grew" section: mappings start -> end, then the Go
    profiles' top growing functions and stacks (empty tables left out)."""
    grew = report.get("what_grew") or {}
    out: list[tuple[str, Row, list[Row]]] = []
    if grew.get("mappings"):
        rows = [
            [m["name"], mib(m["start"]), mib(m["end"]), _signed_bytes(m["delta"])]
            for m in grew["mappings"]
        ]
        out.append(
            ("RSS by mapping, warm-up end -> end", ["Mapping", "Start", "End", "Change"], rows)
        )
    for key, title, unit in (
        ("heap_functions", "Go heap: functions whose in-use bytes grew most", "bytes"),
        ("heap_stacks", "Go heap: stacks whose in-use bytes grew most", "bytes"),
        ("goroutine_stacks", "Goroutine stacks whose count grew most", "count"),
    ):
        if grew.get(key):
            rows = [
                [
                    g["name"],
                    g["site"] or DASH,
                    mib(g["start"]) if unit == "bytes" else f"{g['start']:.0f}",
                    mib(g["end"]) if unit == "bytes" else f"{g['end']:.0f}",
                    _signed_bytes(g["delta"]) if unit == "bytes" else f"+{g['delta']:.0f}",
                ]
                for g in grew[key]
            ]
            out.append((title, ["Function or stack", "Where", "First", "Latest", "Change"], rows))
    return out


def _signed_bytes(n: float) -> str:
    return ("+" if n >= 0 else "-") + mib(abs(n))


def event_rows(report: dict[str, Any]) -> tuple[Row, list[Row]]:
    header = ["Offset", "Time (UTC)", "Kind", "Message"]
    rows = [
        [offset(e["offset_s"]), (e["time"] or "").replace("+00:00", "Z"), e["kind"], e["message"]]
        for e in report["events"]
    ]
    return header, rows


def setup_rows(report: dict[str, Any]) -> list[Row]:
    run = report["run"]
    rows = [[k, v] for k, v in report["setup"].items()]
    rows += [
        ["Scenario", run["scenario"] + (f": {run['description']}" if run["description"] else "")],
        ["Run", run["id"]],
        ["Started", (run["started"] or DASH).replace("+00:00", "Z")],
        ["Ended", (run["ended"] or "still running").replace("+00:00", "Z")],
        ["Duration", duration(run["duration_s"])],
        ["Status", run["status"]],
    ]
    return rows


def startup_rows(report: dict[str, Any]) -> list[Row]:
    rows = []
    for key, value in report["startup"].items():
        if key.endswith("_bytes"):
            shown = mib(value)
        elif key.endswith("_s"):
            shown = f"{num(value)} s"
        else:
            shown = num(value)
        rows.append([key, shown])
    return rows


def clock(seconds: Any) -> str:
    """m:ss (h:mm:ss from an hour)."""
    s = max(0, round(seconds)) if isinstance(seconds, int | float) else 0
    h, m, sec = s // 3600, s // 60 % 60, s % 60
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"
