"""The project's own scripts install every program the tests run (a fresh machine has
none of them by hand): each program the tests name is in tests/support/tools.py, each of
its packages in scripts/install-system-deps.sh, and under CI=true each is on PATH."""

from __future__ import annotations

import ast
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.support.tools import ALIASES, BASE_SYSTEM, MISSING_ON_PURPOSE, TOOLS

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "install-system-deps.sh"
SPAWNS = {"run", "Popen", "check_output", "check_call", "call"}


def installed_packages() -> set[str]:
    """The packages of install-system-deps.sh's full set (the PACKAGES=( ... ) array)."""
    text = SCRIPT.read_text()
    found = re.search(r"^PACKAGES=\((.*?)^\)", text, re.MULTILINE | re.DOTALL)
    assert found, "install-system-deps.sh has no PACKAGES=( ... ) array"
    return set(found.group(1).split())


def named_programs(source: str) -> set[str]:
    """Programs a test module names: shutil.which("X"), not_installed(..., ["X", ...]) and
    the first element of a literal argv given to subprocess."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0]
        if called == "which" and isinstance(first, ast.Constant) and isinstance(first.value, str):
            names.add(first.value)
        elif called in SPAWNS and isinstance(first, ast.List) and first.elts:
            head = first.elts[0]
            if isinstance(head, ast.Constant) and isinstance(head.value, str):
                names.add(head.value)
        elif (
            called == "not_installed" and len(node.args) > 1 and isinstance(node.args[1], ast.List)
        ):
            names |= {e.value for e in node.args[1].elts if isinstance(e, ast.Constant)}  # type: ignore[misc]
    return names


def test_named_programs_finds_what_a_test_calls() -> None:
    source = (
        'import shutil, subprocess\nshutil.which("tcpdump")\n'
        'subprocess.run(["unbound", "-d"])\nnot_installed("x", ["kresd"])\n'
    )
    assert named_programs(source) == {"tcpdump", "unbound", "kresd"}


def test_every_program_the_tests_name_is_in_the_tool_table() -> None:
    unknown = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for name in named_programs(path.read_text()):
            name = ALIASES.get(name, name)
            if name not in TOOLS and name not in BASE_SYSTEM | MISSING_ON_PURPOSE:
                unknown[name] = path.relative_to(ROOT)
    assert not unknown, f"programs the tests run, missing from tests/support/tools.py: {unknown}"


def test_every_tool_package_is_installed_by_the_project() -> None:
    packages = installed_packages()
    missing = sorted({pkg for pkg in TOOLS.values() if pkg not in packages})
    assert not missing, f"scripts/install-system-deps.sh does not install {missing}"


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="a machine set up by hand may lack some")
def test_under_ci_every_tool_is_on_path() -> None:
    missing = {p: pkg for p, pkg in TOOLS.items() if shutil.which(p) is None}
    assert not missing, f"not on PATH (scripts/install-system-deps.sh installs them): {missing}"
