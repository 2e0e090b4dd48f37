"""Go's debug=1 profile text, the profile store's thinning, and the pprof sampler's failures."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from soak.clock import NS_PER_S
from soak.pproftext import parse_profile, scale_heap_sample
from soak.profiles import captures_to_drop, list_profiles, read_profile_text, thin, write_profile
from soak.samplers.pprof import PprofSampler
from soak.samplers.selection import PprofSamplerConfig
from soak.targets.base import Running

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pprof"
S = NS_PER_S


def fixture(name: str) -> str:
    return (FIXTURES / f"refdns-leak-{name}.txt").read_text()


def test_heap_profile_records_are_scaled_for_sampling() -> None:
    heap = parse_profile(fixture("heap-2"))
    assert heap.kind == "heap" and heap.sample_rate_bytes == 512 * 1024
    top = max(heap.records, key=lambda r: r.bytes)
    assert top.function == "main.(*server).leakName"
    assert top.site == "refdns/server.go:393"
    assert top.stack[:3] == (
        "main.(*server).leakName",
        "main.(*server).forward",
        "main.(*server).answer",
    )
    # 55 sampled objects of 16 KiB at a 512 KiB rate stand for about 32.5 times as many
    assert top.count == scale_heap_sample(55, 901120, 524288)[0] == 1788
    assert 28_000_000 < top.bytes < 30_000_000


def test_goroutine_profile_counts_stacks_and_skips_the_runtime() -> None:
    g = parse_profile(fixture("goroutine-2"))
    assert g.kind == "goroutine" and g.total_count == 3010
    top = max(g.records, key=lambda r: r.count)
    assert (top.count, top.function) == (3000, "main.(*server).leakName.func1")
    assert all(r.bytes == 0 for r in g.records)


@pytest.mark.parametrize(
    "text",
    ["", "<html><body>login</body></html>", "heap profile: x", "goroutine profile: total 3\nhi\n"],
)
def test_text_that_is_not_a_profile_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_profile(text)


def test_thinning_keeps_first_and_latest_and_spreads_the_rest() -> None:
    captures = [(t, 10) for t in range(10)]
    dropped = captures_to_drop(captures, max_captures=6, max_bytes=10**9)
    kept = sorted(set(range(10)) - set(dropped))
    assert len(kept) == 6 and kept[0] == 0 and kept[-1] == 9
    assert dropped[0] == 1  # the oldest of equal gaps goes first
    assert captures_to_drop(captures, max_captures=100, max_bytes=55) == captures_to_drop(
        captures, max_captures=5, max_bytes=10**9
    )
    assert captures_to_drop([(0, 10**9), (1, 10**9)], 2, 1) == []  # never below two


def test_store_writes_lists_reads_and_thins(tmp_path: Path) -> None:
    for t in range(5):
        for kind in ("heap", "goroutine"):
            write_profile(tmp_path, t * S, "interval", kind, fixture(f"{kind}-1").encode())
    stored = list_profiles(tmp_path)
    assert len(stored) == 10
    assert read_profile_text(stored[0]).startswith("goroutine profile: total 510")
    assert thin(tmp_path, max_captures=3, max_bytes=10**9) == 4
    assert sorted({p.time_ns for p in list_profiles(tmp_path)}) == [0, 2 * S, 4 * S]


def _sampler(
    tmp_path: Path, handler: httpx.MockTransport, background: bool = False, **cfg: object
) -> tuple[PprofSampler, Running]:
    running = Running("refdns", "127.0.0.1", {"api": 8080}, 1, None, run_dir=tmp_path)
    sampler = PprofSampler(
        PprofSamplerConfig(interval_s=10, **cfg),  # type: ignore[arg-type]
        lambda: running,
        client=httpx.Client(transport=handler),
        background=background,
        profiles_dir=tmp_path,
    )
    return sampler, running


def test_captures_at_the_interval_and_indexes_each_capture(tmp_path: Path) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        kind = request.url.path.rsplit("/", 1)[-1]
        assert request.url.params["debug"] == "1"
        return httpx.Response(200, text=fixture(f"{kind}-1"))

    sampler, _ = _sampler(tmp_path, httpx.MockTransport(answer))
    points = [p for t in range(0, 25) for p in sampler.sample(t * S)]
    assert [p.tags["kind"] for p in points] == ["profile"] * 3  # at 0, 10 and 20 s
    assert "first" in str(points[0].fields["message"])
    assert len(list_profiles(tmp_path)) == 6
    sampler.request_capture("growing")
    assert sampler.sample(25 * S)[0].tags["kind"] == "profile"
    assert {p.reason for p in list_profiles(tmp_path)} == {"first", "interval", "growing"}


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(401, json={"error": "a valid API token is required"}),
        httpx.Response(404, text="404 page not found"),
        httpx.Response(200, text="<html>not a profile</html>"),
    ],
)
def test_a_bad_endpoint_is_one_event_and_a_recovery_another(
    tmp_path: Path, response: httpx.Response
) -> None:
    state = {"bad": True}

    def answer(request: httpx.Request) -> httpx.Response:
        if state["bad"]:
            return response
        return httpx.Response(200, text=fixture(request.url.path.rsplit("/", 1)[-1] + "-1"))

    sampler, _ = _sampler(tmp_path, httpx.MockTransport(answer))
    points = [p for t in range(0, 60, 10) for p in sampler.sample(t * S)]
    assert [p.tags["kind"] for p in points] == ["pprof_failed"]
    assert sampler.failures == 6 and list_profiles(tmp_path) == []
    state["bad"] = False
    kinds = [p.tags["kind"] for p in sampler.sample(60 * S)]
    assert kinds == ["pprof_recovered", "profile"]


def test_warmup_end_gets_its_own_capture(tmp_path: Path) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=fixture(request.url.path.rsplit("/", 1)[-1] + "-1"))

    sampler, _ = _sampler(tmp_path, httpx.MockTransport(answer))
    sampler.warmup_end_ns = lambda: 4 * S
    for t in range(0, 8):
        sampler.sample(t * S)
    assert [(p.time_ns, p.reason) for p in list_profiles(tmp_path) if p.kind == "heap"] == [
        (0, "first"),
        (4 * S, "warmup_end"),
    ]


def test_in_the_background_a_slow_capture_does_not_hold_up_the_tick(tmp_path: Path) -> None:
    gate = threading.Event()

    def answer(request: httpx.Request) -> httpx.Response:
        gate.wait(10)  # a forced GC on a big heap
        return httpx.Response(200, text=fixture(request.url.path.rsplit("/", 1)[-1] + "-1"))

    sampler, _ = _sampler(tmp_path, httpx.MockTransport(answer), background=True)
    start = time.monotonic()
    assert sampler.sample(0) == []  # started, not waited for
    assert sampler.sample(10 * S) == []  # still running: not a second one at once
    assert time.monotonic() - start < 1.0
    gate.set()
    (point,) = sampler.wait(10)
    assert point.tags["kind"] == "profile" and point.time_ns == 0  # its own tick's time
    assert len(list_profiles(tmp_path)) == 2
