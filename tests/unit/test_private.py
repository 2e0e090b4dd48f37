"""The data directory and what soak renders are their user's only."""

from __future__ import annotations

import stat
from pathlib import Path

from soak.placeholders import Placeholders
from soak.runs.layout import DataDir
from soak.runs.state import StateStore
from soak.targets.render import write_files
from soak.targets.specs import RenderedFile


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_data_directory_is_made_or_tightened_to_0700(tmp_path: Path) -> None:
    fresh = DataDir(tmp_path / "a" / "data").create()
    assert mode(fresh.root) == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    DataDir(loose).create()
    assert mode(loose) == 0o700


def test_the_state_file_is_0600_from_its_creation(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.db")
    store.close()
    assert mode(tmp_path / "state.db") == 0o600


def test_rendered_files_are_private_unless_their_spec_says(tmp_path: Path) -> None:
    values = Placeholders(run_dir=str(tmp_path), host="127.0.0.1", ports={"dns": 53})
    files = [
        RenderedFile(dest="a.conf", content="port={port.dns}"),
        RenderedFile(dest="b.sh", content="#!/bin/sh", mode=0o750),
    ]
    a, b = write_files(files, values, tmp_path, tmp_path)
    assert (mode(a), mode(b)) == (0o600, 0o750)
    assert a.read_text() == "port=53"
    # A docker target's default: its container's user reads it through a bind mount.
    (again,) = write_files(files[:1], values, tmp_path, tmp_path, default_mode=0o644)
    assert mode(again) == 0o644
