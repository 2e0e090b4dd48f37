"""A target's files: paths relative to the scenario, templates rendered into the run directory.

The placeholders themselves (`{data_dir}`, `{port.<name>}`, ...) are soak.placeholders'.
"""

from __future__ import annotations

from pathlib import Path

from soak.errors import InputError, not_utf8
from soak.placeholders import Placeholders, render
from soak.targets.config import RenderedFile


def resolve(path: str, base_dir: Path) -> Path:
    """A path from a scenario: relative ones are relative to the scenario's directory."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else base_dir / p


def file_text(spec: RenderedFile, base_dir: Path) -> str:
    """The unrendered text of a file spec: its inline content or its template."""
    if (spec.content is None) == (spec.template is None):
        raise InputError(f"file {spec.dest!r}: give exactly one of `content` or `template`")
    if spec.content is not None:
        return spec.content
    assert spec.template is not None
    template = resolve(str(spec.template), base_dir)
    try:
        return template.read_text(encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or exc
        raise InputError(f"file {spec.dest!r}: cannot read template {template}: {reason}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"file {spec.dest!r}: template {template}: {not_utf8(exc)}") from None


def file_dest(spec: RenderedFile, run_dir: Path) -> Path:
    dest = (run_dir / spec.dest).resolve()
    if not dest.is_relative_to(run_dir.resolve()):
        raise InputError(f"file {spec.dest!r}: must stay inside the run directory")
    return dest


def write_files(
    files: list[RenderedFile], values: Placeholders, run_dir: Path, base_dir: Path
) -> list[Path]:
    """Renders every file spec into the run directory; returns the paths written."""
    written = []
    for spec in files:
        dest = file_dest(spec, run_dir)
        text = render(file_text(spec, base_dir), values, f"file {spec.dest}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
        dest.chmod(spec.mode)
        written.append(dest)
    return written
