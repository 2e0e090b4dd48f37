"""A failed run's logs, kept after its run directory goes (without `--keep`): the
versions' logs and the migration's, where a release pipeline collects them."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from soak.runs.layout import upgrade_data_dir

LOG_SUFFIX = ".log"


def keep_logs(run_dir: Path, dest: Path, redact: Callable[[str], str]) -> list[Path]:
    """Every log under `run_dir` (not the server's own data) copied under `dest`, in the
    same places, line by line with the secret values masked (they are never kept in
    clear); the files written. Nothing to keep: `dest` is not made."""
    data_dir = upgrade_data_dir(run_dir)
    logs = [
        p
        for p in sorted(run_dir.rglob(f"*{LOG_SUFFIX}"))
        if p.is_file() and not p.is_symlink() and data_dir not in p.parents
    ]
    written: list[Path] = []
    if logs:
        dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    for path in logs:
        out = dest / path.relative_to(run_dir)
        out.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # the user's only
        with open(path, errors="replace") as src, open(fd, "w") as dst:
            for line in src:  # a long log is not read into memory
                dst.write(redact(line))
        written.append(out)
    return written
