"""`soak status RUN` of a foreground run, from another process, while it runs: its load
figures come from the run's stored ledger, so `lost` is a number (the live line's), not
`-`."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.soakrun import demo_in_foreground, run_soak, wait_for

pytestmark = pytest.mark.e2e


def _status(data: Path) -> dict[str, Any] | None:
    listed = run_soak("list", "--json", "--data-dir", str(data))
    runs = [r for r in json.loads(listed.stdout or "[]") if r["status"] == "running"]
    if not runs:
        return None
    shown = run_soak("status", runs[0]["id"], "--json", "--data-dir", str(data))
    st: dict[str, Any] = json.loads(shown.stdout)
    return st if (st.get("load_totals") or {}).get("sent") else None


def test_status_mid_run_says_lost_as_a_number(tmp_path: Path) -> None:
    data = tmp_path / "data"
    fg = demo_in_foreground(data)
    try:
        st = wait_for(lambda: _status(data), 90.0, "the running run's ledger has windows")
        assert st["load_totals"]["sent"] >= st["load_totals"]["completed"] > 0
        assert st["lost"] == st["load_totals"]["lost"]
        text = run_soak("status", st["id"], "--data-dir", str(data)).stdout
        assert re.search(r"^\s*lost\s+[\d,]+ \(\d+\.\d{4}%\)", text, re.MULTILINE), text
    finally:
        fg.send_signal(signal.SIGINT)
        try:
            fg.wait(60)
        except subprocess.TimeoutExpired:
            fg.kill()
