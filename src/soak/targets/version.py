"""The version the target itself reports, beside the one the scenario names.

Optional and simple: `target.version_command` (an argv run on this machine, e.g.
`[unbound, -V]`; its first non-empty output line), else for a docker target the image's
`org.opencontainers.image.version` label or its tag. None when neither says.
"""

from __future__ import annotations

import subprocess
from typing import Any

from soak.targets.specs import DockerTarget, TargetConfig

VERSION_TIMEOUT_S = 10.0
OCI_VERSION_LABEL = "org.opencontainers.image.version"
MAX_CHARS = 200


def detect_version(cfg: TargetConfig) -> str | None:
    """The reported version, or None; OSError or TimeoutExpired when the command fails."""
    if cfg.version_command:
        done = subprocess.run(
            cfg.version_command,
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            check=False,
        )
        return first_line(done.stdout) or first_line(done.stderr)
    if isinstance(cfg, DockerTarget):
        return image_version(cfg.image)
    return None


def image_version(image: str) -> str | None:
    """The image's version label, else its tag (`pdns:4.9` -> `4.9`, not `latest`)."""
    from soak.docker_client import engine

    labels: dict[str, Any] = engine().images.get(image).labels or {}
    label = labels.get(OCI_VERSION_LABEL)
    if label:
        return str(label)[:MAX_CHARS]
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    return tag if tag and tag != "latest" else None


def first_line(text: str) -> str | None:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:MAX_CHARS]
    return None
