"""Placeholders in argv, commands, environment and config files: pure text work.

`{data_dir}`, `{run_dir}`, `{host}` and `{port.<name>}` are replaced; any other
braces are left alone, so JSON, YAML and shell snippets in templates survive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from soak.errors import InputError, not_utf8
from soak.targets.config import RenderedFile

_PLACEHOLDER_RE = re.compile(r"\{(data_dir|run_dir|host|port\.[A-Za-z0-9_.-]+)\}")


@dataclass(frozen=True)
class Placeholders:
    run_dir: str
    host: str
    ports: dict[str, int] = field(default_factory=dict)
    data_dir: str | None = None  # None: not known (yet), {data_dir} is an error

    def value(self, key: str, where: str) -> str:
        if key.startswith("port."):
            name = key.removeprefix("port.")
            if name not in self.ports:
                known = ", ".join(sorted(self.ports)) or "none"
                raise InputError(f"{where}: unknown port {{port.{name}}} (named ports: {known})")
            return str(self.ports[name])
        if key == "data_dir":
            if self.data_dir is None:
                raise InputError(f"{where}: {{data_dir}} cannot be used here")
            return self.data_dir
        return self.run_dir if key == "run_dir" else self.host


def render(text: str, values: Placeholders, where: str = "target") -> str:
    """`text` with every known placeholder filled; an unknown port name is an InputError."""
    return _PLACEHOLDER_RE.sub(lambda m: values.value(m.group(1), where), text)


def render_known(text: str, values: Placeholders) -> str:
    """`text` with the placeholders `values` can fill; the others left as written."""

    def value(m: re.Match[str]) -> str:
        try:
            return values.value(m.group(1), "target")
        except InputError:
            return m.group(0)

    return _PLACEHOLDER_RE.sub(value, text)


def render_all(items: list[str], values: Placeholders, where: str) -> list[str]:
    return [render(item, values, where) for item in items]


def render_map(items: dict[str, str], values: Placeholders, where: str) -> dict[str, str]:
    return {key: render(value, values, f"{where}.{key}") for key, value in items.items()}


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
