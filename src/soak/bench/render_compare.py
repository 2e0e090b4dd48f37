"""A comparison (Comparison.to_json()) as a table: terminal text and Markdown."""

from __future__ import annotations

import math
from typing import Any

HEADER = ["Figure", "A", "B", "Difference", "95% CI", "Welch p", "Holm p", "Threshold", "Verdict"]


def _v(value: float, unit: str) -> str:
    if unit == "q/s":
        text = f"{value:,.0f}"
    elif abs(value) >= 100:
        text = f"{value:,.1f}"
    else:
        text = f"{value:.3g}" if unit != "ms" else f"{value:.3f}"
    return f"{text} {unit}".strip()


def _pct(value: float) -> str:
    return f"{value:+.1f}%" if math.isfinite(value) else "n/a"


def figure_rows(cmp: dict[str, Any]) -> list[list[str]]:
    rows = []
    for f in cmp["figures"]:
        ci = f["ci_pct"]
        verdict = f["verdict"].upper() if f["verdict"] == "worse" else f["verdict"]
        if f["note"]:
            verdict += f" ({f['note']})"
        rows.append([
            f["name"], _v(f["a"], f["unit"]), _v(f["b"], f["unit"]), _pct(f["diff_pct"]),
            "-" if ci is None else f"[{_pct(ci[0])}, {_pct(ci[1])}]",
            "-" if f["p_value"] is None else f"{f['p_value']:.3f}",
            "-" if f.get("p_adjusted") is None else f"{f['p_adjusted']:.3f}",
            f"±{f['threshold_pct']:g}%", verdict,
        ])  # fmt: skip
    return rows


def leak_table_rows(cmp: dict[str, Any]) -> list[list[str]]:
    def slope(v: float | None) -> str:
        return "-" if v is None else f"{v:.4g}/h"

    return [
        [r["resource"], slope(r["a_slope_per_hour"]), r["a_verdict"] or "-",
         slope(r["b_slope_per_hour"]), r["b_verdict"] or "-"]
        for r in cmp["leaks"]
    ]  # fmt: skip


def _aligned(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    return [
        ("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))).rstrip()
        for row in [header, *rows]
    ]


def render_compare_text(cmp: dict[str, Any], a_label: str, b_label: str) -> str:
    lines = [f"soak compare: A = {cmp['a']} ({a_label}), B = {cmp['b']} ({b_label})", ""]
    rows = figure_rows(cmp)
    lines += _aligned(HEADER, rows) if rows else ["  no figure in common"]
    if cmp["leaks"]:
        lines += ["", "Leak slopes", ""]
        header = ["Resource", "A slope", "A verdict", "B slope", "B verdict"]
        lines += _aligned(header, leak_table_rows(cmp))
    for side, names in (("A", cmp["only_a"]), ("B", cmp["only_b"])):
        if names:
            lines.append(f"only in {side}: {', '.join(names)}")
    lines += ["", *noise_floor_lines(cmp)]
    worse = cmp["worse"]
    lines += ["", f"result: {'WORSE: ' + ', '.join(worse) if worse else 'no figure worse'}"]
    return "\n".join(lines) + "\n"


def noise_floor_lines(cmp: dict[str, Any]) -> list[str]:
    """How a difference becomes a verdict, and which figures were too noisy to judge."""
    n = sum(1 for f in cmp["figures"] if f["p_value"] is not None)
    lines = [
        f"A figure is better or worse only beyond its threshold and at Holm p <"
        f" {cmp.get('alpha', 0.05):g} (corrected over the {n} figures tested); erratic: a"
        f" side's coefficient of variation is above {cmp.get('erratic_cv', 0.1):g} and the"
        " difference within three times it."
    ]
    erratic = cmp.get("erratic") or []
    if erratic:
        lines.append(f"erratic (too noisy to call, not counted as worse): {', '.join(erratic)}")
    return lines


def render_compare_markdown(cmp: dict[str, Any], a_label: str, b_label: str) -> str:
    lines = [f"# soak compare: {a_label} against {b_label}", ""]
    lines += [f"A = `{cmp['a']}`, B = `{cmp['b']}`", ""]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "---|" * len(HEADER))
    lines += ["| " + " | ".join(r) + " |" for r in figure_rows(cmp)]
    lines += ["", *noise_floor_lines(cmp)]
    if cmp["leaks"]:
        lines += [
            "",
            "| Resource | A slope | A verdict | B slope | B verdict |",
            "|---|---|---|---|---|",
        ]
        lines += ["| " + " | ".join(r) + " |" for r in leak_table_rows(cmp)]
    return "\n".join(lines) + "\n"
