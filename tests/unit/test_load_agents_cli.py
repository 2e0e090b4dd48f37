"""`soak load` with `load.agents`: bad input is one line on stderr, exit 2, nothing started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from soak.cli import main


def _scenario(tmp_path: Path, agents: dict[str, Any]) -> Path:
    path = tmp_path / "s.yaml"
    data = {
        "name": "agents",
        "target": {
            "runtime": "external",
            "name": "dns",
            "ports": {"dns": {"host": 5300, "protocol": "both"}},
        },
        "phases": [{"name": "steady", "duration_s": "2s"}],
        "load": {
            "rate_qps": 300,
            "duration_s": 2,
            "mix": [{"name": "q", "queries": ["www.example.test A"]}],
            "agents": agents,
        },
    }
    path.write_text(yaml.safe_dump(data))
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    return int(exc.value.code or 0), err


# (agents, environment, a word of the one line): each refused before anything starts.
BAD_AGENTS = [
    ({"count": 0}, {}, "count"),
    (
        {"count": 2, "engine": "swarm"},
        {"DOCKER_HOST": "unix:///nonexistent.sock"},
        "no Docker engine answers",
    ),
    (
        {"count": 2, "engine": "kubernetes"},
        {"KUBECONFIG": "/nonexistent/kubeconfig"},
        "kubernetes: no kubeconfig",
    ),
]


def _bad_environment(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


CLOUD = ({"count": 2, "engine": "cloud"}, {}, "engine")  # refused by the config's model


@pytest.mark.parametrize(
    ("command", "agents", "env", "message"),
    [
        *(("load", *case) for case in [*BAD_AGENTS, CLOUD]),
        *(("start", *case) for case in BAD_AGENTS),
    ],
)
def test_bad_agents_refused_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    agents: dict[str, Any],
    env: dict[str, str],
    message: str,
) -> None:
    """`soak load --scenario` and a soak run (the service's path) refuse bad agents in one
    line, before anything starts: no run record made."""
    _bad_environment(monkeypatch, env)
    monkeypatch.setenv("SOAK_HOME", str(tmp_path / "home"))
    path = _scenario(tmp_path, agents)
    if command == "load":
        argv = ["load", "--server", "127.0.0.1:5300", "--scenario", str(path)]
    else:
        argv = ["start", "--foreground", str(path)]
    code, err = _run(argv, capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and message in err
    home = tmp_path / "home"
    assert not home.exists() or not any(home.iterdir()), list(home.iterdir())


def test_agents_refused_by_bench(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _scenario(tmp_path, {"count": 2, "engine": "local"})
    code, err = _run(["bench", str(path)], capsys)
    assert code == 2, err
    assert err.strip().splitlines() == [
        "soak: load.agents: `soak bench` does not start load agents yet; `soak load --scenario` "
        "does (docs/scale.md)"
    ]
