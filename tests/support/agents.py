"""Scenario files for `soak load` with agents against a server already running on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def agents_scenario(tmp_path: Path, name: str, port: int, load: dict[str, Any]) -> Path:
    """s.yaml in tmp_path: an external unbound on port, one steady phase as long as the load."""
    scenario = {
        "name": name,
        "target": {
            "runtime": "external",
            "name": "unbound",
            "ports": {"dns": {"host": port, "protocol": "both"}},
        },
        "phases": [{"name": "steady", "duration_s": f"{load['duration_s']}s"}],
        "load": load,
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path
