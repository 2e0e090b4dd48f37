"""A report dict as one self-contained HTML page (inline SVG plots), Markdown, or JSON."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from soak.report.headline import ACTIVE_STATUSES, headline
from soak.report.segment_tables import segment_tables
from soak.report.svg import Chart, Line, Marker, render_chart
from soak.report.tables import (
    Row,
    accounting_note,
    agent_rows,
    class_rows,
    criteria_rows,
    event_rows,
    growth_tables,
    phase_table,
    probe_rows,
    setup_rows,
    startup_rows,
    verdict_rows,
)

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: #222; margin: 24px auto; max-width: 1100px; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 4px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.headline { font-size: 16px; font-weight: 600; padding: 8px 12px; border-radius: 4px; }
.pass { background: #e6f4ea; color: #1e6b33; } .fail { background: #fce8e6; color: #a50e0e; }
.running { background: #eef3fb; color: #1a4a8a; }
td.pass, td.fail { font-weight: 600; }
.v-growing { color: #a50e0e; font-weight: 600; } .v-levelling { color: #8a5a00; }
.v-ok { color: #1e6b33; } .v-insufficient { color: #666; }
svg.chart { display: block; max-width: 1000px; }
svg .frame { fill: #fff; stroke: #bbb; } svg .grid { stroke: #eee; }
svg .tick, svg .legend, svg .unit, svg .phase-label {
  font: 11px system-ui, sans-serif; fill: #444; }
svg .phase { stroke: #888; stroke-dasharray: 4 3; }
svg .event { stroke: #d62728; stroke-width: 2; }
svg .end { stroke: #444; stroke-width: 2; }
.not-judged { color: #666; font-style: italic; }
.note { color: #666; }
"""


def render_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, allow_nan=False) + "\n"


# ---------------------------------------------------------------- HTML


def _table(header: Row | None, rows: list[Row], classes: dict[int, str] | None = None) -> str:
    classes = classes or {}
    out = ["<table>"]
    if header:
        out.append("<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>")
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = classes.get(i, "")
            if cls == "result":
                cls = "pass" if cell == "pass" else "fail" if cell == "FAIL" else "not-judged"
            elif cls == "verdict":
                cls = f"v-{cell.split()[0]}" if cell else ""
            attr = f' class="{cls}"' if cls else ""
            cells.append(f"<td{attr}>{escape(cell)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _charts(report: dict[str, Any]) -> list[str]:
    markers = [Marker(m["x_s"], m["label"], m["kind"]) for m in report["markers"]]
    out = []
    for plot in report["plots"]:
        lines = [Line(ln["name"], [(p[0], p[1]) for p in ln["points"]]) for ln in plot["lines"]]
        chart = Chart(plot["title"], plot["unit"], lines, markers, report["x_max_s"])
        out.append(f'<h3 id="plot-{escape(plot["id"])}">{escape(plot["title"])}</h3>')
        out.append(f'<figure class="plot" data-plot="{escape(plot["id"])}">')
        out.append(render_chart(chart))
        out.append("</figure>")
    return out


def _what_grew_html(report: dict[str, Any]) -> list[str]:
    grew = report.get("what_grew")
    if not grew or (grew.get("chart") is None and not grew.get("profiles")):
        return []
    out = ["<h2>What grew</h2>"]
    chart = grew.get("chart")
    if chart:
        lines = [Line(ln["name"], [(p[0], p[1]) for p in ln["points"]]) for ln in chart["lines"]]
        out.append(
            '<h3 id="plot-memory_map">RSS by mapping (stacked: each line tops its band)</h3>'
        )
        out.append('<figure class="plot" data-plot="memory_map">')
        out.append(render_chart(Chart(chart["title"], chart["unit"], lines, [], report["x_max_s"])))
        out.append("</figure>")
    for title, header, rows in growth_tables(report):
        out += [f"<h3>{escape(title)}</h3>", _table(header, rows)]
    if not grew.get("profiles"):
        out.append('<p class="note">No Go profiles (the pprof sampler was off or failed).</p>')
    return out


def render_html(report: dict[str, Any]) -> str:
    run = report["run"]
    title = f"Soak {run['scenario']}: {run['target']} {run['version']}".strip()
    ok = report["passed"]
    mood = "running" if run.get("status") in ACTIVE_STATUSES else ("pass" if ok else "fail")
    body = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="headline {mood}">{escape(headline(report))}</p>',
        "<h2>Setup</h2>",
        _table(None, setup_rows(report)),
    ]
    if report["startup"]:
        body += ["<h2>Start-up</h2>", _table(None, startup_rows(report))]
    header, rows = phase_table(report)
    body += ["<h2>Phases</h2>", f'<p class="note">{escape(accounting_note(report))}</p>']
    body += [_table(header, rows)]
    versions = segment_tables(report)  # a soak across an upgrade
    if versions:
        body += ["<h2>Versions</h2>"]
        body += [f"<h3>{escape(t)}</h3>\n{_table(h, r)}" for t, h, r in versions]
    if report.get("classes"):
        body += ["<h2>Classes</h2>", _table(*class_rows(report))]
    if report.get("agents"):
        body += ["<h2>Load agents</h2>", _table(*agent_rows(report))]
    if report.get("probes"):
        body += ["<h2>Probes</h2>", _table(*probe_rows(report))]
    header, rows = criteria_rows(report)
    body += ["<h2>Criteria</h2>", _table(header, rows, {4: "result"})]
    header, rows = verdict_rows(report)
    body += ["<h2>Leak verdicts</h2>"]
    body += [
        _table(header, rows, {1: "verdict"})
        if rows
        else '<p class="note">No resource series to judge.</p>'
    ]
    body += _what_grew_html(report)
    body += [
        "<h2>Over time</h2>",
        '<p class="note">Dashed lines: phase starts. Red ticks: exits, restarts, gaps, '
        "errors, alerts, swaps.</p>",
        *_charts(report),
    ]
    header, rows = event_rows(report)
    body += [f"<h2>Events ({report['events_total']})</h2>", _table(header, rows)]
    if report["events_total"] > len(report["events"]):
        body.append(f'<p class="note">The first {len(report["events"])} are listed.</p>')
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


# ---------------------------------------------------------------- Markdown


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(header: Row, rows: list[Row]) -> list[str]:
    out = ["| " + " | ".join(_md_cell(h) for h in header) + " |"]
    out.append("|" + "---|" * len(header))
    out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return out


def render_markdown(report: dict[str, Any]) -> str:
    run = report["run"]
    title = f"Soak {run['scenario']}: {run['target']} {run['version']}".strip()
    out = [f"# {title}", "", f"**{headline(report)}**", "", "## Setup", ""]
    out += _md_table(["", ""], setup_rows(report))
    if report["startup"]:
        out += ["", "## Start-up", "", *_md_table(["", ""], startup_rows(report))]
    out += ["", "## Phases", "", accounting_note(report), "", *_md_table(*phase_table(report))]
    if report.get("accounting"):  # the audit found figures that disagree (soak.report.audit)
        out += ["", "**Load figures that disagree with the run's ledger:**", ""]
        out += [f"- {line}" for line in report["accounting"]]
    for title, header, rows in segment_tables(report):  # a soak across an upgrade
        out += ["", f"## Versions: {title}", "", *_md_table(header, rows)]
    if report.get("classes"):
        out += ["", "## Classes", "", *_md_table(*class_rows(report))]
    if report.get("agents"):
        out += ["", "## Load agents", "", *_md_table(*agent_rows(report))]
    if report.get("probes"):
        out += ["", "## Probes", "", *_md_table(*probe_rows(report))]
    out += ["", "## Criteria", "", *_md_table(*criteria_rows(report))]
    header, rows = verdict_rows(report)
    out += ["", "## Leak verdicts", ""]
    out += _md_table(header, rows) if rows else ["No resource series to judge."]
    if report.get("what_grew"):
        for title, header, rows in growth_tables(report):
            out += ["", f"## What grew: {title}", "", *_md_table(header, rows)]
    header, rows = event_rows(report)
    out += ["", f"## Events ({report['events_total']})", "", *_md_table(header, rows)]
    plots = ", ".join(p["title"] for p in report["plots"])
    if plots:  # a run with no samples (a target that never started) has none to point to
        out += ["", f"Plots over time ({plots}) are in the HTML report."]
    out += [""]
    return "\n".join(out)
