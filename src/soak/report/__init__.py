"""soak.report: a run's report as one self-contained HTML page (inline SVG), JSON or Markdown."""

from soak.report.build import build_report
from soak.report.model import PhaseSpan, ReportInput
from soak.report.render import render_html, render_json, render_markdown

__all__ = [
    "PhaseSpan",
    "ReportInput",
    "build_report",
    "render_html",
    "render_json",
    "render_markdown",
]
