"""The smaps parser and grouping from a real refdns capture; the sampler on real processes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from soak import procfs
from soak.samplers.selection import SmapsSamplerConfig
from soak.samplers.smaps import SmapsSampler
from soak.smaps import HEAP_PATH, LIBS_PATH, OTHER_PATH, STACKS_PATH, group, parse_smaps
from soak.targets.base import Running

ROOT = Path(__file__).resolve().parents[2]
REFDNS_ROOT = ROOT / "tests" / "fixtures" / "proc" / "refdns"
REFDNS_PID = 20992
KIB = 1024


def refdns_text(name: str) -> str:
    return (REFDNS_ROOT / str(REFDNS_PID) / name).read_text()


def test_every_region_is_parsed_and_the_sums_match_smaps_rollup() -> None:
    maps = parse_smaps(refdns_text("smaps"))
    assert len(maps) == refdns_text("smaps").count(" kB\nPss:")  # one per Rss line
    rollup = procfs.parse_smaps_rollup(refdns_text("smaps_rollup"))
    groups = group(maps, top_paths=8)
    assert sum(g.rss_bytes for g in groups) == rollup["Rss"]
    assert sum(g.anon_bytes for g in groups) == rollup["Anonymous"]
    assert abs(sum(g.pss_bytes for g in groups) - rollup["Pss"]) <= 16 * KIB  # read apart


def test_refdns_groups_heap_stacks_database_and_libraries() -> None:
    groups = {(g.kind, g.path): g for g in group(parse_smaps(refdns_text("smaps")))}
    heap = groups[("heap", HEAP_PATH)]
    assert heap.rss_bytes == heap.anon_bytes > 10_000 * KIB  # the Go heap and malloc arenas
    stacks = groups[("stack", STACKS_PATH)]
    assert 0 < stacks.rss_bytes < 1024 * KIB  # cgo threads' stacks, above their guard pages
    db = [
        g for (kind, path), g in groups.items() if kind == "file" and path.endswith("querylog.db")
    ]
    assert len(db) == 1 and db[0].rss_bytes > 0 and db[0].anon_bytes == 0
    libs = groups[("lib", LIBS_PATH)]
    assert libs.rss_bytes > 5_000 * KIB  # the refdns binary (code) and libc, libsqlite3
    assert ("other", OTHER_PATH) in groups


def test_files_past_the_top_n_are_added_to_other() -> None:
    maps = parse_smaps(refdns_text("smaps"))
    full = group(maps, top_paths=100)
    files = [g for g in full if g.kind == "file"]
    assert len(files) == 3
    cut = group(maps, top_paths=1)
    kept = [g for g in cut if g.kind == "file"]
    assert [g.path for g in kept] == [max(files, key=lambda g: g.rss_bytes).path]
    other_before = next(g for g in full if g.kind == "other").rss_bytes
    other_after = next(g for g in cut if g.kind == "other").rss_bytes
    moved = sum(g.rss_bytes for g in files) - kept[0].rss_bytes
    assert other_after == other_before + moved
    assert sum(g.rss_bytes for g in cut) == sum(g.rss_bytes for g in full)


def test_stack_guard_rule_and_special_paths() -> None:
    text = "".join(
        f"{start:x}-{end:x} {perms} 00000000 00:00 0 {path}\nRss: {rss} kB\nPss: {rss} kB\n"
        f"Anonymous: {anon} kB\n"
        for start, end, perms, path, rss, anon in [
            (0x1000, 0x2000, "---p", "", 0, 0),  # a one-page guard ...
            (0x2000, 0x802000, "rw-p", "", 40, 40),  # ... under a thread stack
            (0x900000, 0x4900000, "---p", "", 0, 0),  # a 64 MiB reservation ...
            (0x4900000, 0x4A00000, "rw-p", "", 900, 900),  # ... under heap: not a stack
            (0x5000000, 0x5001000, "rw-p", "[stack]", 8, 8),
            (0x6000000, 0x6001000, "rw-s", "/dev/zero (deleted)", 4, 0),
            (0x7000000, 0x7001000, "rw-s", "/memfd:buf (deleted)", 4, 0),
            (0x8000000, 0x8001000, "r--p", "[vdso]", 4, 0),
            (0x9000000, 0x9001000, "rw-p", "[anon:arena]", 12, 12),
        ]
    )
    groups = {(g.kind, g.path): g.rss_bytes for g in group(parse_smaps(text))}
    assert groups[("stack", STACKS_PATH)] == 48 * KIB
    assert groups[("heap", HEAP_PATH)] == 912 * KIB
    assert groups[("other", OTHER_PATH)] == 12 * KIB
    assert groups[("lib", LIBS_PATH)] == 0


def test_the_sampler_reads_a_fixture_root_and_skips_without_a_pid() -> None:
    cfg = SmapsSamplerConfig(top_paths=2)
    target = Running("refdns", "127.0.0.1", {}, REFDNS_PID, None)
    points = SmapsSampler(cfg, lambda: target, proc_root=REFDNS_ROOT).sample(7)
    assert {p.measurement for p in points} == {"memory_map"}
    assert all(
        p.time_ns == 7 and set(p.fields) == {"rss_bytes", "pss_bytes", "anon_bytes"} for p in points
    )
    assert sum(1 for p in points if p.tags["kind"] == "file") == 2
    no_pid = Running("x", "127.0.0.1", {}, None, None)
    assert SmapsSampler(cfg, lambda: no_pid, proc_root=REFDNS_ROOT).sample(7) == []
    assert SmapsSampler(cfg, lambda: None, proc_root=REFDNS_ROOT).sample(7) == []


@pytest.fixture
def mapper(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.mapper", "--duration-s", "30", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return proc

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=10)


def _growth(proc: subprocess.Popen[str], seconds: float) -> dict[tuple[str, str], int]:
    """RSS growth by (kind, path) over `seconds`, from the real /proc."""
    target = Running("m", "127.0.0.1", {}, proc.pid, None)
    sampler = SmapsSampler(SmapsSamplerConfig(), lambda: target)
    before = {
        (p.tags["kind"], p.tags["path"]): int(p.fields["rss_bytes"]) for p in sampler.sample(0)
    }
    time.sleep(seconds)
    after = {
        (p.tags["kind"], p.tags["path"]): int(p.fields["rss_bytes"]) for p in sampler.sample(1)
    }
    return {k: after[k] - before.get(k, 0) for k in after}


def test_a_process_mapping_a_growing_file_grows_file_backed_not_anonymous(
    mapper: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    data = tmp_path / "cache.bin"
    growth = _growth(mapper("--file", str(data), "--kib-per-s", "2048"), 3.2)
    assert growth[("file", str(data))] >= 4096 * KIB
    assert growth[("heap", HEAP_PATH)] < 1024 * KIB


def test_a_process_that_mallocs_grows_anonymous(
    mapper: Callable[..., subprocess.Popen[str]],
) -> None:
    growth = _growth(mapper("--kib-per-s", "2048"), 3.2)
    assert growth[("heap", HEAP_PATH)] >= 4096 * KIB
    assert not any(kind == "file" and rss > 512 * KIB for (kind, _), rss in growth.items())


def test_a_mapping_listed_again_after_it_grew_mid_read_counts_once() -> None:
    def region(start: int, end: int, rss_kib: int) -> str:
        return (
            f"{start:x}-{end:x} rw-p 00000000 00:00 0 \nRss: {rss_kib} kB\nPss: {rss_kib} kB\n"
            f"Anonymous: {rss_kib} kB\n"
        )

    # [0x10000, 0x20000) printed, then it merged with [0x8000, ...) and was printed again
    text = region(0x1000, 0x2000, 4) + region(0x10000, 0x20000, 64) + region(0x8000, 0x24000, 80)
    maps = parse_smaps(text)
    assert [(m.start, m.end) for m in maps] == [(0x1000, 0x2000), (0x8000, 0x24000)]
    (heap,) = [g for g in group(maps) if g.kind == "heap"]
    assert heap.rss_bytes == 84 * KIB
