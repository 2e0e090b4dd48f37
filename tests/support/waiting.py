"""Polling until a condition holds, with a deadline on the monotonic clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(check: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.5) -> Any:
    """check()'s first truthy value; AssertionError naming `what` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting until {what}")
