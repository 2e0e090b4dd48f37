"""`soak compare A B`: two runs (bench results or soak runs) side by side, with verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import click

from soak.analysis.comparison import DEFAULT_THRESHOLDS_PCT, Comparison, compare_figures
from soak.bench.inputs import RunFigures, leak_rows, resolve
from soak.bench.render_compare import render_compare_markdown, render_compare_text
from soak.errors import CheckFailed, InputError


def parse_thresholds(items: tuple[str, ...]) -> dict[str, float]:
    """`--threshold latency=30` (percent) for a kind of figure."""
    out: dict[str, float] = {}
    for item in items:
        kind, sep, raw = item.partition("=")
        if not sep or kind not in DEFAULT_THRESHOLDS_PCT:
            kinds = ", ".join(DEFAULT_THRESHOLDS_PCT)
            raise InputError(f"--threshold takes KIND=PERCENT with KIND one of {kinds}: {item!r}")
        try:
            value = float(raw.rstrip("%"))
        except ValueError:
            raise InputError(f"--threshold {kind}: not a number: {raw!r}") from None
        if value < 0:
            raise InputError(f"--threshold {kind}: must not be negative")
        out[kind] = value
    return out


def _names(run: RunFigures) -> str:
    return ", ".join(sorted(n for n, f in run.figures.items() if f.values)) or "none"


def compare_runs(a: RunFigures, b: RunFigures, thresholds: dict[str, float]) -> Comparison:
    return compare_figures(a.id, a.figures, b.id, b.figures, thresholds, leak_rows(a, b))


def emit(cmp: Comparison, a: RunFigures, b: RunFigures, as_json: bool, out: Path | None) -> str:
    """Writes the JSON and markdown comparison into `out` (if given); returns what to print."""
    from soak.runs.layout import compare_paths

    data = cmp.to_json()
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        json_path, md_path = compare_paths(out)
        json_path.write_text(json.dumps(data, indent=2) + "\n")
        md_path.write_text(render_compare_markdown(data, a.label, b.label))
    if as_json:
        return json.dumps(data, indent=2) + "\n"
    return render_compare_text(data, a.label, b.label)


@click.command("compare")
@click.argument("a")
@click.argument("b")
@click.option("--threshold", "thresholds", multiple=True,
              help="KIND=PERCENT: throughput, latency, tail, cpu, memory, count")  # fmt: skip
@click.option("--data-dir", type=click.Path(path_type=Path), default=None)
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None)
@click.option("--json", "as_json", is_flag=True, help="print the JSON comparison")
def compare_cmd(
    a: str,
    b: str,
    thresholds: tuple[str, ...],
    data_dir: Path | None,
    out_dir: Path | None,
    as_json: bool,
) -> None:
    """Compare run A (old) with run B (new): a bench.json, a bench id or a soak run id each.

    Exit 1 when a figure of B is worse than A's beyond its threshold and the noise.
    """
    from soak.runs.layout import default_root

    chosen = parse_thresholds(thresholds)
    base = data_dir or default_root()
    run_a, run_b = resolve(a, base), resolve(b, base)
    if (run_a.bench is None) != (run_b.bench is None):
        raise InputError("compare a bench result with a bench result, a soak run with a soak run")
    cmp = compare_runs(run_a, run_b, chosen)
    if not cmp.rows:  # a pipeline must not read "no figure worse" of nothing compared
        raise InputError(
            f"{run_a.id} and {run_b.id} have no figure in common"
            f" ({run_a.id}: {_names(run_a)}; {run_b.id}: {_names(run_b)}); nothing to compare"
        )
    click.echo(emit(cmp, run_a, run_b, as_json, out_dir), nl=False)
    if cmp.worse:
        raise CheckFailed(f"B is worse than A: {', '.join(cmp.worse)}")
