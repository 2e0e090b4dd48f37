"""The `local` agents engine: `soak agent` processes on this machine against a real unbound."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from soak.cli import main
from tests.support.agents import agents_scenario
from tests.support.servers import ServerProc, unbound

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    with unbound(tmp_path_factory.mktemp("unbound")) as s:
        yield s


def test_soak_load_with_local_agents(
    server: ServerProc, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "q.txt").write_text("www.example.test A\nmail.example.test A\n")
    load = {
        "rate_qps": 301,
        "duration_s": 3,
        "flows": 4,
        "mix": [
            {"name": "file", "weight": 2, "file": "q.txt"},
            {"name": "miss", "random": {"zone": "example.test"}},
        ],
        "agents": {"count": 2, "engine": "local"},
    }
    path = agents_scenario(tmp_path, "agents-local", server.port, load)
    argv = ["load", "--server", f"127.0.0.1:{server.port}", "--scenario", str(path), "--json"]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    assert exc.value.code == 0, out.err
    result = json.loads(out.out)
    assert result["agents"] == 2
    assert [a["rate_target_qps"] for a in result["per_agent"]] == [150.5, 150.5]
    assert abs(result["sent"] - 903) <= 9
    assert result["sent"] == result["completed"] + result["lost"] + result["abandoned"]
    assert result["accounting_errors"] == [] and result["notes"] == []
    assert [s["state"] for s in result["states"]] == ["complete", "complete"]
    assert result["latency_ms"]["p99"] is not None
