"""`make lint`'s check on repeats in the tests: at most 10 pairs of places in tests/ that
share six or more lines, as the `duplicates` tool counts them (docs/architecture.md).

A helper written twice drifts; tests/support/ and tests/e2e/soakrun.py hold the parts
tests share. Without the tool on PATH the check says so and passes, except under
CI=true, where a missing tool fails.

    python3 scripts/check_test_duplicates.py [--max-pairs 10] [--folder tests]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-pairs", type=int, default=10)
    ap.add_argument("--folder", default="tests")
    args = ap.parse_args()
    tool = shutil.which("duplicates")
    if tool is None:
        print("check_test_duplicates: no `duplicates` on PATH", file=sys.stderr)
        return 1 if os.environ.get("CI") == "true" else 0
    argv = [tool, "--repo", args.folder, "--seconds", "120", "--most", "40"]
    out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    if "incomplete:" in out:
        print(f"check_test_duplicates: the count is incomplete:\n{out}", file=sys.stderr)
        return 1
    first = out.splitlines()[0] if out else ""
    found = re.match(r"(\d+) pairs? of places", first)
    pairs = int(found.group(1)) if found else 0
    if pairs > args.max_pairs:
        over = f"{args.folder}: {pairs} duplicated pairs, over {args.max_pairs}"
        print(f"{over}:\n{out}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
