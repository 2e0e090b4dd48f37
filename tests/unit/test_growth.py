"""What grew: profile diffs from fixtures, mapping growth, culprits and projections."""

from __future__ import annotations

from pathlib import Path

from soak.analysis.growth import (
    culprit,
    goroutine_stacks,
    heap_functions,
    limit_for,
    mapping_growth,
    project,
)
from soak.pproftext import Profile, parse_profile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pprof"
MIB = 2**20


def profile(name: str) -> Profile:
    return parse_profile((FIXTURES / f"refdns-leak-{name}.txt").read_text())


def test_profile_diff_names_the_leaking_function_and_stack() -> None:
    heap = heap_functions(profile("heap-1"), profile("heap-2"))
    assert heap[0].name == "main.(*server).leakName"
    assert heap[0].site == "refdns/server.go:393"
    assert heap[0].delta == 29288747 - 4792704  # estimated from 55 and 9 sampled objects
    assert all(g.delta > 0 for g in heap)
    stacks = goroutine_stacks(profile("goroutine-1"), profile("goroutine-2"))
    assert stacks[0].name == "main.(*server).leakName.func1"
    assert (stacks[0].start, stacks[0].end) == (500, 3000)
    assert len(stacks) == 1  # nothing else grew


def test_mapping_growth_start_to_end_with_groups_that_come_and_go() -> None:
    series = {
        ("heap", "[heap+anon]"): [(1, 100.0), (2, 150.0), (3, 300.0)],
        ("file", "/var/lib/refdns/querylog.db"): [(2, 50.0), (3, 900.0)],  # came in later
        ("file", "/old.db"): [(1, 400.0), (2, 400.0)],  # fell out of the top N
        ("lib", "[libraries]"): [(0, 5.0), (1, 10.0), (3, 10.0)],
    }
    grown = {g.name: (g.start, g.end) for g in mapping_growth(series, since_ns=1)}
    assert grown["file /var/lib/refdns/querylog.db"] == (0.0, 900.0)
    assert grown["heap [heap+anon]"] == (100.0, 300.0)
    assert grown["file /old.db"] == (400.0, 0.0)
    assert grown["lib [libraries]"] == (10.0, 10.0)
    assert next(iter(grown)) == "file /var/lib/refdns/querylog.db"  # largest growth first
    assert mapping_growth({}, 0) == []


def test_projection_to_a_limit_and_without_one() -> None:
    p = project("rss_anon_bytes", 300 * MIB, 100 * MIB, 512 * MIB)
    assert p.hours_to_limit is not None and abs(p.hours_to_limit - 2.12) < 0.01
    assert p.text == "limit in 2.1 h"
    assert project("goroutines", 3000, 500, None).text == "no limit"
    assert project("fds", 10, -1, 1024).text == "not growing toward the limit"
    assert project("fds", 1024, 5, 1024).hours_to_limit == 0.0
    assert project("fds", 100, 924 / 72, 1024).text == "limit in 3.0 days"
    assert limit_for("rss_bytes", 1e9, 1024) == 1e9
    assert limit_for("fds", 1e9, 1024) == 1024
    assert limit_for("goroutines", 1e9, 1024) is None


def test_culprit_by_resource() -> None:
    heap = heap_functions(profile("heap-1"), profile("heap-2"))
    stacks = goroutine_stacks(profile("goroutine-1"), profile("goroutine-2"))
    maps = mapping_growth(
        {
            ("file", "/q.db"): [(0, 0.0), (1, 50.0 * MIB)],
            ("heap", "[heap+anon]"): [(0, 1.0), (1, 2.0 * MIB)],
        }
    )
    said = culprit("heap_inuse_bytes", heap=heap, goroutines=stacks, mappings=maps)
    assert said is not None and said.startswith("main.(*server).leakName (refdns/server.go:393): +")
    said = culprit("goroutines", heap=heap, goroutines=stacks)
    assert said == "main.(*server).leakName.func1 (refdns/server.go:398): +2,500 goroutines"
    assert culprit("rss_bytes", mappings=maps) == "mapping file /q.db: +50.0 MiB RSS"
    assert culprit("rss_anon_bytes", mappings=maps) == "mapping heap [heap+anon]: +2.0 MiB RSS"
    assert culprit("fds", mappings=maps) is None
    assert culprit("heap_inuse_bytes") is None


def test_goroutines_without_frames_are_not_an_empty_row() -> None:
    """`19 @ 0x473421` (only goexit: goroutines starting or ending as the profile is taken)
    has no function and no site: it is left out, not shown as `() 0 -> 19`."""
    base = parse_profile("goroutine profile: total 1\n")
    latest = parse_profile(
        "goroutine profile: total 22\n19 @ 0x473421\n\n"
        "3 @ 0x442276 0x473421\n"
        "#\t0x442275\tmain.wait+0x24\t/src/refdns/server.go:10\n"
    )
    (grown,) = goroutine_stacks(base, latest)
    assert grown.name == "main.wait" and grown.site.endswith("server.go:10")
    assert (grown.start, grown.end) == (0, 3)
