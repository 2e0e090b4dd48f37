"""The replay's compiled DoH loop is an optional extension whose every part is a
dependency of its build (pyproject.toml) and of `make setup` (the Makefile), so that an
edit to any of them rebuilds it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ROOT / "src/soak/load/replay"


def included(path: Path) -> set[Path]:
    """The files `path` includes with quotes, and theirs, resolved."""
    found: set[Path] = set()
    for name in re.findall(r'^#include "([^"]+)"', path.read_text(), re.MULTILINE):
        part = (path.parent / name).resolve()
        if part not in found:
            found |= {part} | included(part)
    return found


def test_the_doh_replay_extension_is_optional_and_depends_on_every_part() -> None:
    exts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    [ext] = [e for e in exts["ext-modules"] if e["name"] == "soak.load.replay._fastreplay_doh"]
    assert ext["optional"] is True
    assert set(ext["libraries"]) == {"ssl", "crypto", "nghttp2"}
    parts = included(REPLAY / "_fastreplay_doh.c")
    assert REPLAY / "_fastreplay_play.h" in parts and len(parts) >= 10, parts
    assert parts == {(ROOT / d).resolve() for d in ext["depends"]}
    makefile = (ROOT / "Makefile").read_text()
    for part in {*parts, REPLAY / "_fastreplay_doh.c"}:
        assert str(part.relative_to(ROOT)) in makefile, part
