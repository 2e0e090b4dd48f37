"""The test-image sources: the mirror comes from the host at build time, never the repo."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_mirror_written_into_the_repository() -> None:
    paths = [ROOT / "scripts" / "build-test-images.sh", *(ROOT / "docker").rglob("*")]
    for path in paths:
        if path.is_file():
            text = path.read_text(errors="replace")
            assert "deb.debian.org" not in text and "snapshot.debian.org" not in text, path


def _recipes() -> dict[str, tuple[str, str]]:
    """The script's table: image -> (Debian suite, context directory)."""
    script = (ROOT / "scripts" / "build-test-images.sh").read_text()
    entries = re.findall(r'\[(soak-test/[^\]]+)\]="(\w+) (docker/[\w-]+)"', script)
    return {image: (suite, context) for image, suite, context in entries}


def test_each_image_has_a_dockerfile_built_by_the_script() -> None:
    recipes = _recipes()
    for name in ("pdns-auth", "pdns-recursor", "unbound"):
        assert recipes[f"soak-test/{name}:latest"] == ("bookworm", f"docker/{name}")
    for image, (suite, context) in recipes.items():
        assert suite in ("bullseye", "bookworm", "trixie"), image
        assert (ROOT / context / "Dockerfile").is_file(), image


def test_the_versioned_pdns_images_come_from_three_suites() -> None:
    recipes = _recipes()
    assert recipes["soak-test/pdns-auth:4.4"][0] == "bullseye"
    assert recipes["soak-test/pdns-auth:4.7"][0] == "bookworm"
    assert recipes["soak-test/pdns-auth:4.9"][0] == "trixie"
