"""A bench result (the JSON dict) as the seeds' tables: terminal text, Markdown, HTML."""

from __future__ import annotations

import json
from collections.abc import Callable
from html import escape
from typing import Any

from soak.bench.plot import latency_chart

Table = tuple[str, list[str], list[list[str]]]


def _n(v: float | None, fmt: str = ",.0f") -> str:
    return "-" if v is None else format(v, fmt)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f} ms"


def _cores(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _limit(limit: dict[str, Any] | None) -> str:
    if not limit or not limit.get("kind"):
        return ""
    return {"generator": "GENERATOR-BOUND", "machine": "machine-bound", "server": "server"}.get(
        limit["kind"], limit["kind"]
    )


def _section_rows(
    classes: list[dict[str, Any]], key: str, row: Callable[[str, dict[str, Any]], list[str]]
) -> list[list[str]]:
    """One row per query class whose result has the section `key` (row(name, section))."""
    return [row(c["name"], c[key]) for c in classes if c.get(key)]


def _saturation_row(name: str, s: dict[str, Any]) -> list[str]:
    q = s["qps"]
    return [
        name, _n(q["median"]), _n(q["best"]), f"{q['spread_pct']:.1f}% ({q['n']} runs)",
        _ms(s["avg_ms"]), f"{_cores(s['target_cores'])} cores",
        "-" if s["cpu_us_per_query"] is None else f"{s['cpu_us_per_query']:.1f} µs",
        f"{_cores(s['generator_cores'])} cores", str(s["lost"]), _limit(s["limit"]),
    ]  # fmt: skip


def saturation_table(classes: list[dict[str, Any]]) -> Table:
    header = ["Query class", "q/s (median)", "best", "spread", "Avg latency", "Server CPU",
              "CPU/query", "Generator CPU", "Lost", "Limit"]  # fmt: skip
    rows = _section_rows(classes, "saturation", _saturation_row)
    return "Throughput at saturation", header, rows


def _knee_row(name: str, k: dict[str, Any]) -> list[str]:
    high = k["knee_high_qps"]
    bracket = f"[{_n(k['knee_low_qps'])} ; {_n(high) if high is not None else 'none failed'}]"
    width = "-" if k["width_pct"] is None else f"±{k['width_pct'] / 2:.1f}%"
    note = "GENERATOR-BOUND: the generator could not offer more" if k["generator_bound"] else ""
    return [
        name, _ms(k["floor_p50_ms"]), _ms(k["slo_p50_ms"]), f"{_n(k['capacity_qps'])} q/s",
        f"{_n(k['within_slo_qps'])} q/s", bracket + " q/s", width, str(len(k["steps"])), note,
    ]  # fmt: skip


def knee_table(classes: list[dict[str, Any]]) -> Table:
    header = ["Query class", "Idle p50", "SLO (p50)", "Capacity", "Within SLO",
              "Knee bracket", "Width", "Steps", "Note"]  # fmt: skip
    rows = _section_rows(classes, "knee", _knee_row)
    return "Saturation knee (open loop, dichotomic search on p50)", header, rows


def fixed_table(classes: list[dict[str, Any]]) -> Table:
    counters = sorted({k for c in classes for r in c.get("fixed", []) for k in r["counters"]})
    header = ["Query class", "Rate", "Answered", "Avg latency", "Std dev", "p50", "p99",
              "p99.9", "Server CPU", "CPU/query", "Generator CPU", *counters, "Limit"]  # fmt: skip
    rows = []
    for c in classes:
        for r in c.get("fixed", []):
            lat = r["latency_ms"]
            rows.append([
                c["name"], f"{_n(r['offered_qps'])} q/s", f"{_n(r['answered_qps'])} q/s",
                _ms(lat.get("avg")), _ms(lat.get("stddev")), _ms(lat.get("p50")),
                _ms(lat.get("p99")), _ms(lat.get("p999")), f"{_cores(r['target_cores'])} cores",
                "-" if r["cpu_us_per_query"] is None else f"{r['cpu_us_per_query']:.1f} µs",
                f"{_cores(r['generator_cores'])} cores",
                *[_n(r["counters"].get(k), ",.0f") for k in counters], _limit(r["limit"]),
            ])  # fmt: skip
    return "Latency at fixed rates", header, rows


def env_table(result: dict[str, Any]) -> Table:
    env = result["environment"]
    rows = [[k, v if isinstance(v, str) else json.dumps(v)] for k, v in env.items()]
    return "Environment", ["", ""], rows


def criteria_table(result: dict[str, Any]) -> Table:
    rows = [[c["name"], "pass" if c["ok"] else "FAIL", c["message"]] for c in result["criteria"]]
    return "Criteria", ["Criterion", "Result", ""], rows


def tables(result: dict[str, Any]) -> list[Table]:
    classes = result["classes"]
    out = [env_table(result), saturation_table(classes), knee_table(classes), fixed_table(classes)]
    if result["criteria"]:
        out.append(criteria_table(result))
    return [t for t in out if t[2]]


def _notes(result: dict[str, Any]) -> list[str]:
    notes = list(result.get("notes", []))
    for c in result["classes"]:
        notes += [f"{c['name']}: {n}" for n in c.get("notes", [])]
        s = c.get("saturation")
        if s and s["limit"].get("reason"):
            notes.append(f"{c['name']} at saturation: {s['limit']['reason']}")
    return notes


def render_text(result: dict[str, Any]) -> str:
    lines = [_title(result), ""]
    for title, header, rows in tables(result):
        lines += [title, ""]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        for row in [header, *rows] if any(header) else rows:
            lines.append(
                "  "
                + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            )
        lines.append("")
    lines += [f"note: {n}" for n in _notes(result)]
    lines.append(f"result: {'pass' if result['passed'] else 'FAIL'}")
    return "\n".join(lines) + "\n"


def _title(result: dict[str, Any]) -> str:
    t = result["target"]
    who = f"{t['name']} {t['version']}".strip()
    return f"soak bench {result['id']}: {who} ({result['engine']} engine)"


def render_markdown(result: dict[str, Any]) -> str:
    lines = [f"# {_title(result)}", ""]
    for title, header, rows in tables(result):
        lines += [f"## {title}", ""]
        head = header if any(header) else ["", ""]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        lines.append("")
    lines += [f"- {n}" for n in _notes(result)]
    lines += ["", f"Result: **{'pass' if result['passed'] else 'FAIL'}**", ""]
    return "\n".join(lines)


_CSS = """body{font-family:sans-serif;margin:2em;max-width:1200px}
table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}.chart .frame{fill:none;stroke:#999}
.chart text{font-size:12px}"""


def render_html(result: dict[str, Any]) -> str:
    title = escape(_title(result))
    out = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>",
        f"<style>{_CSS}</style></head><body><h1>{title}</h1>",
    ]
    for title, header, rows in tables(result):
        out.append(f"<h2>{escape(title)}</h2><table>")
        if any(header):
            out.append("<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>")
        out += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows]
        out.append("</table>")
    out.append("<h2>Latency against rate</h2>")
    out.append(latency_chart(result["classes"]))
    out += ["<ul>", *[f"<li>{escape(n)}</li>" for n in _notes(result)], "</ul>"]
    out.append(f"<p>Result: <b>{'pass' if result['passed'] else 'FAIL'}</b></p></body></html>")
    return "\n".join(out) + "\n"
