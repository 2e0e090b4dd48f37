"""A few MiB held in the data directory, given back when its disk fills.

A full disk stops the point store first; the run must then still record why it
ended (an event, its status, its result), and those writes need space too. The
service keeps this file allocated while it runs and deletes it on a storage fault,
so that the end of the run can be written. It is made again at the next start,
if there is room.
"""

from __future__ import annotations

import logging
import os

from soak.runs.layout import DataDir

log = logging.getLogger(__name__)

RESERVE_BYTES = 2 * 1024**2


def make_reserve(data_dir: DataDir, size_bytes: int = RESERVE_BYTES) -> bool:
    """Allocate the reserve (real blocks, not a sparse file); False if there is no room."""
    path = data_dir.reserve
    try:
        if path.exists() and path.stat().st_size >= size_bytes:
            return True
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.posix_fallocate(fd, 0, size_bytes)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("no room for the %d-byte reserve in %s: %s", size_bytes, data_dir.root, exc)
        path.unlink(missing_ok=True)
        return False
    return True


def release_reserve(data_dir: DataDir) -> bool:
    """Give the reserve's space back; True if there was one."""
    try:
        data_dir.reserve.unlink()
    except FileNotFoundError:
        return False
    return True
