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
from tests.support.skips import ci_forbids_skip


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


def _skip_reason(longrepr: Any) -> str:
    """A skip report's reason: pytest keeps it as (file, line, "Skipped: reason")."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _fail_forbidden_skip(report: Any) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        why = ci_forbids_skip(_skip_reason(report.longrepr))
        if why is not None:
            report.outcome = "failed"
            report.longrepr = why


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under CI=true a test whose tool, image or engine is missing fails; never skips."""
    outcome = yield
    _fail_forbidden_skip(outcome.get_result())  # type: ignore[attr-defined]


# Modules skipped whole (pytest.skip(allow_module_level=True)) under CI=true: a failed
# collection would stop the whole session, so they are named at its end and fail it.
_FORBIDDEN_MODULE_SKIPS: list[str] = []


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:
        why = ci_forbids_skip(_skip_reason(report.longrepr))
        if why is not None:
            _FORBIDDEN_MODULE_SKIPS.append(f"{report.nodeid}: {why}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _FORBIDDEN_MODULE_SKIPS:
        terminalreporter.write_line(f"FAILED (module skipped) {line}", red=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _FORBIDDEN_MODULE_SKIPS and exitstatus in (0, 5):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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
