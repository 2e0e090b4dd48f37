"""A run's id, one format for every kind of run: a soak, a bench, an upgrade, a standalone load.

`<slug>-<YYYYMMDD-HHMMSS>-<4 hex>`: the name as a lower-case slug (at most 32 characters,
`run` if nothing is left of it), the UTC start second, and a random token that keeps two
runs started in one second apart. Ids sort by name, then by start time.
"""

from __future__ import annotations

import re
import secrets
import time

SLUG_MAX_CHARS = 32
_STAMP_FORMAT = "%Y%m%d-%H%M%S"
_TAIL = re.compile(r"\d{8}-\d{6}-[0-9a-f]{4}$")


def new_run_id(name: str, now_s: float | None = None) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:SLUG_MAX_CHARS] or "run"
    stamp = time.strftime(_STAMP_FORMAT, time.gmtime(now_s if now_s is not None else time.time()))
    return f"{slug}-{stamp}-{secrets.token_hex(2)}"


def run_id_tail(run_id: str) -> str:
    """The id's start second and token (`20261205-224520-ab12`): as unique as the id, and
    short, for a directory that must keep socket paths under their 107 bytes."""
    found = _TAIL.search(run_id)
    if found is None:
        raise ValueError(f"{run_id!r} is not a run id")
    return found.group(0)
