"""Why a test cannot run on this machine: the reason to skip, or None when it can."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

BUILD_HINT = "run scripts/build-test-images.sh"


def docker_skip_reason(images: Iterable[str], build_hint: str = BUILD_HINT) -> str | None:
    """None when a Docker engine answers and every image is present; else why not."""
    try:
        import docker
    except ImportError:
        return "the docker Python package is not installed"
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # no engine, no socket, no permission: all mean "skip"
        return f"no Docker engine answers ({exc}); `make docker-ready` starts one"
    try:
        for image in images:
            try:
                client.images.get(image)
            except docker.errors.ImageNotFound:
                return f"image {image} missing; {build_hint}"
    finally:
        client.close()
    return None


def docker_engine(images: Iterable[str], build_hint: str = BUILD_HINT) -> Any:
    """A Docker client for a test that needs `images`; the test is skipped when it cannot run."""
    reason = docker_skip_reason(images, build_hint)
    if reason is not None:
        pytest.skip(reason)
    import docker

    return docker.from_env(timeout=30)


def not_installed(
    what: str, programs: Iterable[str] = (), files: Iterable[Path] = ()
) -> str | None:
    """`{what} not installed` when one of the programs is not on PATH or a file is missing."""
    if any(shutil.which(p) is None for p in programs) or not all(f.exists() for f in files):
        return f"{what} not installed"
    return None


def docker_engine_fixture(images: list[str], build_hint: str = BUILD_HINT) -> Any:
    """A module-scoped `engine` fixture: docker_engine(images), the module skipped without it."""

    @pytest.fixture(scope="module")
    def engine() -> Any:
        return docker_engine(images, build_hint)

    return engine


# The only skips a CI run (CI=true) accepts, each with why it cannot be helped there; any
# other skip (a tool, an image or an engine missing) fails the test under CI=true, with the
# reason it gave (tests/conftest.py).
ALLOWED_SKIPS: dict[str, str] = {
    "cannot mount a tmpfs here": "the machine forbids mount (no CAP_SYS_ADMIN)",
    "no cgroup v1 memory controller": "the machine's cgroups are v2 only (no v1 memory limit)",
    "one TCP loop": "the TCP loop has one implementation: its two UDP-loop variants are one test",
    "a machine set up by hand may lack some": "the PATH check runs under CI=true only",
}


def skip_allowed_in_ci(reason: str) -> bool:
    return any(allowed in reason for allowed in ALLOWED_SKIPS)


def ci_forbids_skip(reason: str) -> str | None:
    """Under CI=true, why a skip with this reason is a failure; else None."""
    if os.environ.get("CI") != "true" or skip_allowed_in_ci(reason):
        return None
    return (
        f"skipped under CI=true: {reason} (scripts/install-system-deps.sh and `make test` "
        "must provide it; the skips CI accepts are tests/support/skips.py ALLOWED_SKIPS)"
    )
