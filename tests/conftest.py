import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# tests/support is imported as `tests.support`; the repository root must be importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.agents import AGENT_IMAGE, one_node_swarm, swarm_client


@pytest.fixture(scope="session")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pdns-server data in the 4.3.1 schema (scripts/make-pdns-4.3.1-archive.py), made once.

    Upgrade plans only read it (`data.archive`), so every test may share one copy.
    """
    out = tmp_path_factory.mktemp("fixture") / "pdns-auth-4.3.1.tar.gz"
    script = Path(__file__).resolve().parent.parent / "scripts" / "make-pdns-4.3.1-archive.py"
    subprocess.run([sys.executable, str(script), str(out)], check=True, capture_output=True)
    return out


@pytest.fixture
def work() -> Iterator[Path]:
    """A short work directory: pdns puts a unix socket (at most 107 bytes) in the run dir,
    longer than pytest's temporary paths leave room for."""
    path = Path(tempfile.mkdtemp(prefix="su-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests on the one-node swarm share it (one engine, one swarm): under
    `pytest -n` they run one after another on one worker (`--dist loadgroup`)."""
    for item in items:
        if "swarm" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("swarm"))


# The agent tests' Docker Swarm, per module as each module's tests share it. A module
# with a `client` of its own (the service API's) has that one instead.
@pytest.fixture(scope="module")
def client() -> Any:
    """A docker client with the agent image, or the test skipped saying what to run."""
    return swarm_client(AGENT_IMAGE)


@pytest.fixture(scope="module")
def swarm(client: Any) -> Iterator[None]:
    """This engine a swarm manager for the module (tests.support.agents.one_node_swarm)."""
    with one_node_swarm(client):
        yield
