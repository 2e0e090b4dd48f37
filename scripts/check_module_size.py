"""`make lint`'s module-size check: no module of soak or of its tests over 400 lines.

A module of a few hundred lines can be read at one sitting; one that grows past the
cap wants to be two rooms (docs/architecture.md). Counts every line of each .py, .c
and .h file under the given folders (src and tests by default) and names each one over the
cap on stderr, exit 1; exit 0 when none is.

    python3 scripts/check_module_size.py [--max-lines 400] [FOLDER ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SUFFIXES = (".py", ".c", ".h")


def over_cap(folders: list[Path], max_lines: int) -> list[tuple[Path, int]]:
    """Every .py and .c file under the folders with more than max_lines lines."""
    found = []
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.suffix in SUFFIXES and path.is_file():
                with path.open("rb") as f:
                    lines = sum(1 for _ in f)
                if lines > max_lines:
                    found.append((path, lines))
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-lines", type=int, default=400)
    ap.add_argument("folders", nargs="*", type=Path, default=[Path("src"), Path("tests")])
    args = ap.parse_args()
    found = over_cap(args.folders, args.max_lines)
    for path, lines in found:
        print(f"{path}: {lines} lines, over the cap of {args.max_lines}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
