"""Which server each started version really is: the image a docker version runs (its
id and digests) or the binary a process version runs (its path and sha256), and the
version the server reports itself (the plan's `server_version:`). A plan's `version:`
is only a label: a matrix entry that sets the wrong image shows here, not in it.

Recorded, never judged: a server that cannot say its version is `unknown (why)`."""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass, field
from typing import Any

from soak.errors import SoakError
from soak.probes import http_request
from soak.targets.specs import DockerTarget, TargetConfig
from soak.upgrade import jsonpath
from soak.upgrade.actions import Version, render, run_command
from soak.upgrade.config import ServerVersion
from soak.upgrade.template import Values

SHORT_ID_CHARS = 19  # "sha256:" and 12 hex digits, as `docker images` shows an id
HASH_CHUNK_BYTES = 1 << 20


@dataclass
class Identity:
    side: str  # old, new, rollback
    label: str  # the plan's version label
    image: str | None = None
    image_id: str | None = None
    digests: list[str] = field(default_factory=list)
    binary: str | None = None
    binary_sha256: str | None = None
    reported: str | None = None  # what the server says its version is
    unknown: str | None = None  # why it said nothing, when asked

    def describe(self) -> str:
        parts = []
        if self.image is not None:
            digest = f", digest {self.digests[0]}" if self.digests else ", no registry digest"
            parts.append(f"image {self.image} ({(self.image_id or '?')[:SHORT_ID_CHARS]}{digest})")
        if self.binary is not None:
            parts.append(f"binary {self.binary} (sha256 {(self.binary_sha256 or '?')[:12]})")
        if self.reported is not None:
            mismatch = self.label and self.label not in self.reported
            parts.append(f"reports version {self.reported!r}")
            if mismatch:
                parts.append(f"not the plan's {self.label!r}")
        elif self.unknown is not None:
            parts.append(f"version unknown ({self.unknown})")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "image": self.image,
            "image_id": self.image_id,
            "digests": self.digests,
            "binary": self.binary,
            "binary_sha256": self.binary_sha256,
            "reported_version": self.reported,
            "unknown": self.unknown,
        }

    def properties(self) -> list[tuple[str, str]]:
        """JUnit properties, each named after the side: `new_image_id`, ..."""
        values = {
            "image": self.image,
            "image_id": self.image_id,
            "digest": self.digests[0] if self.digests else None,
            "binary": self.binary,
            "binary_sha256": self.binary_sha256,
            "reported_version": self.reported,
            "version_unknown": self.unknown,
        }
        return [(f"{self.side}_{k}", v) for k, v in values.items() if v is not None]


def identify(
    side: str, cfg: TargetConfig, version: Version, how: ServerVersion | None, values: Values
) -> Identity:
    """`cfg` as it was started (rendered), `version` running."""
    ident = Identity(side, cfg.version)
    if isinstance(cfg, DockerTarget) and version.running.container_id:
        from soak.upgrade.docker_data import image_of

        ident.image = cfg.image
        ident.image_id, ident.digests = image_of(version.running.container_id)
    elif not isinstance(cfg, DockerTarget):
        argv = getattr(cfg, "argv", None) or [""]
        ident.binary = shutil.which(argv[0]) or argv[0]
        ident.binary_sha256 = _sha256(ident.binary)
    if how is not None:
        try:
            ident.reported = _reported(how, version, values)
        except (SoakError, ValueError) as exc:
            ident.unknown = str(exc)
    return ident


def _sha256(path: str) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(HASH_CHUNK_BYTES):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _reported(how: ServerVersion, version: Version, values: Values) -> str:
    if how.argv is not None:
        argv = render(values, version, how.argv)
        proc = run_command(argv, version, {}, how.timeout_s)
        text = (proc.stdout or "") + "\n" + (proc.stderr or "")
        where = f"{argv[0]} exited with {proc.returncode}"
    else:
        assert how.path is not None
        result = http_request(
            "GET", version.url(how.port, render(values, version, how.path)), timeout_s=how.timeout_s
        )
        if result.status != 200:
            raise ValueError(f"GET {how.path}: {result.error or f'status {result.status}'}")
        text, where = result.body.decode(errors="replace"), f"GET {how.path}"
        if how.json_path is not None:
            found = jsonpath.select(result.json(), how.json_path)
            if not found:
                raise ValueError(f"{where}: nothing at {how.json_path}")
            text = str(found[0])
    return _version_in(text, how.match, where)


def _version_in(text: str, match: str | None, where: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if match is None:
        if not lines:
            raise ValueError(f"{where}, no output")
        return lines[0]
    pattern = re.compile(match)
    for line in lines:
        if m := pattern.search(line):
            return m.group(1) if pattern.groups else m.group(0)
    raise ValueError(f"{where}, no line matches /{match}/")
