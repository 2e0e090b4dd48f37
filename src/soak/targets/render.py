"""A target's files: paths relative to the scenario, templates rendered into the run directory.

The placeholders themselves (`{data_dir}`, `{port.<name>}`, ...) are soak.placeholders'.
"""

from __future__ import annotations

import os
from pathlib import Path

from soak.errors import InputError, not_utf8
from soak.placeholders import Placeholders, render, secret_references
from soak.targets.specs import RenderedFile


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


PRIVATE_MODE = 0o600


def write_files(
    files: list[RenderedFile],
    values: Placeholders,
    run_dir: Path,
    base_dir: Path,
    default_mode: int = PRIVATE_MODE,
) -> list[Path]:
    """Renders every file spec into the run directory; returns the paths written. A file
    may hold a revealed secret: it is created with its final mode, never readable by
    others even for a moment (unless its spec says so), and `secret_files` names it for
    removal when its target stops."""
    written = []
    for spec in files:
        dest = file_dest(spec, run_dir)
        text = render(file_text(spec, base_dir), values, f"file {spec.dest}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        mode = default_mode if spec.mode is None else spec.mode
        dest.unlink(missing_ok=True)  # a restart renders again: the mode at creation
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode & PRIVATE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        dest.chmod(mode)
        written.append(dest)
    return written


def secret_files(files: list[RenderedFile], run_dir: Path, base_dir: Path) -> list[Path]:
    """Where the files whose text holds a secret reference (`{env.NAME}`, `{file:PATH}`)
    are rendered: the secret is in clear there, so they go when the target stops (a
    start renders them again). A template that cannot be read is not one of them (it
    was never rendered)."""
    found = []
    for spec in files:
        try:
            text = file_text(spec, base_dir)
        except InputError:
            continue
        if secret_references(text):
            found.append(file_dest(spec, run_dir))
    return found


def remove_secret_files(files: list[RenderedFile], run_dir: Path, base_dir: Path) -> None:
    for path in secret_files(files, run_dir, base_dir):
        path.unlink(missing_ok=True)
