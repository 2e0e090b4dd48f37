"""The version a target reports: `target.version_command`, else a docker image's tag."""

from __future__ import annotations

import sys

from soak.targets.specs import ExternalTarget, ProcessTarget
from soak.targets.version import detect_version, first_line


def test_version_command_first_line() -> None:
    cmd = [sys.executable, "-c", "print(); print('unbound 1.19.3'); print('x')"]
    cfg = ProcessTarget(runtime="process", argv=["true"], version_command=cmd)
    assert detect_version(cfg) == "unbound 1.19.3"


def test_version_on_stderr_and_none_without_a_way_to_ask() -> None:
    cmd = [sys.executable, "-c", "import sys; sys.stderr.write('v2\\n')"]
    assert detect_version(ProcessTarget(runtime="process", argv=["x"], version_command=cmd)) == "v2"
    assert detect_version(ExternalTarget(runtime="external")) is None
    assert first_line("\n  \n") is None
