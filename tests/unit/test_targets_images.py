"""The test-image sources: the mirror comes from the host at build time, never the repo."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_mirror_written_into_the_repository() -> None:
    paths = [ROOT / "scripts" / "build-test-images.sh", *(ROOT / "docker").rglob("*")]
    for path in paths:
        if path.is_file():
            text = path.read_text(errors="replace")
            assert "deb.debian.org" not in text and "snapshot.debian.org" not in text, path


def test_each_image_has_a_dockerfile_built_by_the_script() -> None:
    script = (ROOT / "scripts" / "build-test-images.sh").read_text()
    for name in ("pdns-auth", "pdns-recursor", "unbound"):
        assert (ROOT / "docker" / name / "Dockerfile").is_file()
        assert f"soak-test/{name}:latest docker/{name}" in script
