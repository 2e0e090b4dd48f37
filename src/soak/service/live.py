"""The terminal view of one run: a rich table built from its status dict (pure rendering)."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from soak.analysis.criteria import result_of

VERDICT_STYLE = {"ok": "green", "growing": "bold red", "levelling": "yellow", "insufficient": "dim"}


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def fmt_bytes(value: Any) -> str:
    if not isinstance(value, int | float):
        return "-"
    v = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(v) < 1024 or unit == "GiB":
            return f"{v:.1f} {unit}" if unit != "B" else f"{v:.0f} B"
        v /= 1024
    return f"{v:.1f} GiB"


def fmt_num(value: Any, digits: int = 0, suffix: str = "") -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:,.{digits}f}{suffix}"


def load_figures(status: dict[str, Any]) -> tuple[str, Any, Any, Any]:
    """(scope, achieved q/s, target q/s, p99 ms) of the load: an ended run's whole-run
    figures from its ledger's totals, else the last closed second's."""
    totals = status.get("load_totals") or {}
    seconds = totals.get("seconds")
    if status.get("ended") and isinstance(seconds, int | float) and seconds > 0:
        return (
            "whole run",
            totals.get("sent", 0) / seconds,
            totals.get("due", 0) / seconds,
            status.get("p99_whole_run_ms"),
        )
    load = status.get("latest", {}).get("load,class=all", {})
    return (
        "last second",
        status.get("rate_achieved_qps", load.get("rate_achieved")),
        status.get("rate_target_qps", load.get("rate_target")),
        load.get("lat_p99_ms"),
    )


def summary_rows(status: dict[str, Any]) -> list[tuple[str, str]]:
    """The figures of the view as (label, text); also what `soak status` prints."""
    latest = status.get("latest", {})
    proc = latest.get("process", {})
    runtime = latest.get("runtime", {})
    threads = runtime.get("goroutines")
    threads_label = "goroutines" if threads is not None else "threads"
    if threads is None:
        threads = proc.get("threads")
    scope, achieved, target, p99 = load_figures(status)
    rate, target_rate = fmt_num(achieved, 0), fmt_num(target, 0)
    lost_ratio = status.get("lost_ratio")
    elapsed = fmt_duration(status.get("elapsed_s"))
    if status.get("ended"):  # nothing remains of an ended run: what ran of what was planned
        timing = ("ran / planned", f"{elapsed} of {fmt_duration(status.get('duration_s'))}")
    else:
        timing = ("elapsed / remaining", f"{elapsed} / {fmt_duration(status.get('remaining_s'))}")
    return [
        ("run", f"{status.get('id')} ({status.get('status')})"),
        ("phase", str(status.get("phase") or "-")),
        timing,
        (f"rate achieved / target ({scope})", f"{rate} / {target_rate} q/s"),
        (
            "lost",
            f"{fmt_num(status.get('lost'))}"
            + (f" ({lost_ratio:.4%})" if isinstance(lost_ratio, float) else ""),
        ),
        (f"p99 ({scope})", fmt_num(p99, 2, " ms")),
        ("RSS", fmt_bytes(proc.get("rss_bytes"))),
        ("RSS (anon)", fmt_bytes(proc.get("rss_anon_bytes"))),
        ("fds", fmt_num(proc.get("fds"))),
        (threads_label, fmt_num(threads)),
        ("restarts", str(status.get("restarts", 0))),
        *store_rows(status),
        *owed_rows(status),
    ]


def store_rows(status: dict[str, Any]) -> list[tuple[str, str]]:
    """The run's points in the embedded store so far (`soak status RUN`; not the live view)."""
    if "store_bytes" not in status:
        return []
    text = f"{fmt_bytes(status['store_bytes'])} ({status['store_samples']:,} samples)"
    return [("stored", f"{text} in {status['store_path']}")]


def owed_rows(status: dict[str, Any]) -> list[tuple[str, str]]:
    """Points an ended run's sinks still owe (replayed until taken), one row per sink."""
    return [
        (f"owed to {sink}", f"{points:,} points (spooled, replayed until taken)")
        for sink, points in status.get("owed", {}).items()
    ]


def render(status: dict[str, Any]) -> RenderableType:
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for label, text in summary_rows(status):
        table.add_row(label, text)
    parts: list[RenderableType] = [table]
    verdicts = status.get("verdicts") or []
    if verdicts:
        vt = Table(title="leak verdicts", title_justify="left")
        for col in ("resource", "verdict", "slope/h", "p"):
            vt.add_column(col)
        for v in verdicts:
            style = VERDICT_STYLE.get(str(v.get("verdict")), "")
            vt.add_row(
                str(v.get("resource")),
                Text(str(v.get("verdict")), style=style),
                fmt_slope(str(v.get("resource")), v.get("slope_per_hour")),
                fmt_num(v.get("p_value"), 3),
            )
        parts.append(vt)
    events = status.get("events") or []
    if events:
        et = Text()
        for e in events[-5:]:
            et.append(f"{e.get('time', '')}  {e.get('kind')}: {e.get('message')}\n", style="dim")
        parts.append(et)
    return Group(*parts)


def fmt_slope(resource: str, slope: Any) -> str:
    """A growth per hour in the resource's unit: bytes as KiB/MiB, counts as numbers."""
    if resource.endswith("_bytes"):
        return f"{fmt_bytes(slope)}/h"
    return f"{fmt_num(slope, 2)}/h"


def verdict_lines(status: dict[str, Any]) -> list[str]:
    return [
        f"{v.get('resource')}: {v.get('verdict')} "
        f"({fmt_slope(str(v.get('resource')), v.get('slope_per_hour'))})"
        for v in status.get("verdicts") or []
    ]


def criteria_lines(status: dict[str, Any]) -> list[str]:
    lines = []
    for c in status.get("criteria") or []:
        # A criterion without the data for it is `not judged`: never shown as a pass.
        mark = result_of(bool(c.get("ok")), bool(c.get("judged", True)))
        mark = "FAIL" if mark == "fail" else mark
        window = c.get("window")
        where = f" [{window}]" if window and window != "run" else ""
        lines.append(f"{mark}  {c.get('name')}{where}: {c.get('message', '')}")
    return lines


def progress_line(status: dict[str, Any]) -> str | None:
    """One plain progress line for a log (no terminal): no table, nothing to wrap. None
    before the first tick, when there is nothing measured to say."""
    elapsed = status.get("elapsed_s")
    scope, achieved, target, p99 = load_figures(status)
    if not elapsed or (achieved is None and not status.get("latest")):
        return None
    parts = [
        f"soak: {status.get('id')}: +{fmt_duration(elapsed)}"
        f" ({fmt_duration(status.get('remaining_s'))} left)",
        f"phase {status.get('phase') or '-'}",
    ]
    if achieved is not None:
        lost_ratio = status.get("lost_ratio")
        lost = f"lost {fmt_num(status.get('lost'))}"
        if isinstance(lost_ratio, float):
            lost += f" ({lost_ratio:.4%})"
        parts.append(lost)
        rate = f"{scope}: rate {fmt_num(achieved)}"
        if isinstance(target, int | float) and target > 0:
            rate += f" of {fmt_num(target)}"
        parts.append(rate + " q/s")
        parts.append(f"p99 {fmt_num(p99, 2, ' ms')}")
    restarts = status.get("restarts", 0)
    if restarts:
        parts.append(f"restarts {restarts}")
    return ", ".join(parts)


def plain_lines(status: dict[str, Any]) -> list[str]:
    """The view's figures as `label: text` lines, for a log (no terminal)."""
    return [f"{label}: {text}" for label, text in summary_rows(status)]
