"""The HTML report opened in a real headless Chromium: the plots are in the DOM and on screen."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from soak.report import build_report, render_html
from soak.report.svg import PALETTE
from soak.results.grew import report_section
from tests.unit.test_report import report_input, write_run

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        pytest.fail("chromium is not installed (make system-deps)")
    argv = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'chromium-profile'}",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA PNG, filters undone."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = unfilter(raw[start], raw[start + 1 : start + 1 + stride], prev, channels)
        prev = line
        rows.append(
            line if channels == 3 else b"".join(line[i : i + 3] for i in range(0, stride, 4))
        )
    return width, height, rows


def add_bytes(x: bytes, y: bytes) -> bytes:
    """Bytewise (x + y) mod 256 on big integers: no carry crosses a byte."""
    n = len(x)
    low, high = int.from_bytes(b"\x7f" * n, "big"), int.from_bytes(b"\x80" * n, "big")
    a, b = int.from_bytes(x, "big"), int.from_bytes(y, "big")
    return (((a & low) + (b & low)) ^ ((a ^ b) & high)).to_bytes(n, "big")


def unfilter(kind: int, filtered: bytes, prev: bytes, bpp: int) -> bytes:
    if kind == 0:
        return filtered
    if kind == 2:  # Up, the most common: done on whole rows at once
        return add_bytes(filtered, prev)
    line = bytearray(filtered)
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + a) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (a + prev[i]) // 2) & 0xFF
        else:
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
    return bytes(line)


def count_color(rows: list[bytes], hex_color: str, every: int = 4) -> int:
    """Pixels of exactly this color in every `every`-th row (line centres have the exact
    stroke color; antialiased edges do not)."""
    want = bytes.fromhex(hex_color.lstrip("#"))
    return sum(1 for row in rows[::every] for i in range(0, len(row), 3) if row[i : i + 3] == want)


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:  # type: ignore[type-arg]
    tmp = tmp_path_factory.mktemp("report")
    store = write_run(tmp / "points.db")
    try:
        report = build_report(store, report_input(store), what_grew=report_section)
    finally:
        store.close()
    path = tmp / "report.html"
    path.write_text(render_html(report))
    return path, report


def test_dom_holds_the_plots_with_their_data(
    report_file: tuple[Path, dict], tmp_path: Path
) -> None:  # type: ignore[type-arg]
    path, report = report_file
    dom = chromium(tmp_path, "--dump-dom", path.as_uri()).stdout
    assert "<h2>Phases</h2>" in dom
    figures = re.findall(r'<figure class="plot" data-plot="([a-z]+)">', dom)
    assert figures == [p["id"] for p in report["plots"]]
    assert {"load", "latency", "memory", "heap", "fds", "tasks", "drops", "api"} <= set(figures)
    paths = re.findall(
        r'<path class="series" data-series="([^"]+)" data-points="(\d+)" d="([^"]+)"', dom
    )
    by_name = {name: (int(n), d) for name, n, d in paths}
    for name in ("target", "achieved", "p99", "anonymous", "file-backed", "in use", "fds"):
        n, d = by_name[name]
        assert n > 100, name
        # every point drawn, each segment (a gap, e.g. the restart, breaks the line) from M
        assert d.count("L") + d.count("M") == n
    assert "GET /stats/summary" in by_name


def test_screenshot_shows_the_plots(report_file: tuple[Path, dict], tmp_path: Path) -> None:  # type: ignore[type-arg]
    path, _ = report_file
    shot = tmp_path / "report.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,4500", path.as_uri())
    width, height, rows = png_pixels(shot)
    assert (width, height) == (1200, 4500)
    # The first lines' colors cover real area (the load, latency, lost and memory plots
    # are within the first 4500 px: the verdict table with its notes stands above them),
    # and the FAILED headline is red on pink.
    # (the legend swatches alone give about 50 in the sampled rows)
    assert count_color(rows, PALETTE[0]) > 150
    assert count_color(rows, PALETTE[1]) > 150
    assert count_color(rows, "#fce8e6") > 2000
    white = count_color(rows, "#ffffff")
    assert white < 0.97 * width * height / 4
