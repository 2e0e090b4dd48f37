"""refdns's /debug/pprof behind its token, read by the pprof sampler, diffed by analysis.growth.

A real refdns -leak forwarding to dnsmasq: unique names park goroutines that hold
16 KiB each; the diff of two captures names the leaking function and stack. A
missing token (401) or a wrong path (404) is one event however many captures
fail; a target that exits between captures leaves the earlier ones readable.
"""

from __future__ import annotations

from pathlib import Path

import dns.message
import dns.query
import pytest

from soak.analysis.growth import culprit, goroutine_stacks, heap_functions, heap_stacks
from soak.clock import NS_PER_S
from soak.pproftext import parse_profile
from soak.profiles import first_and_latest, list_profiles, read_profile_text
from soak.runs.layout import profiles_dir
from soak.samplers.pprof import PprofSampler
from soak.samplers.selection import PprofSamplerConfig
from soak.targets.base import Running
from tests.support.refdns import TOKEN, refdns
from tests.support.servers import ServerProc, dnsmasq_upstream

pytestmark = pytest.mark.integration
S = NS_PER_S


def flood(server: ServerProc, start: int, end: int) -> None:
    for i in range(start, end):
        query = dns.message.make_query(f"u{i}.leak.example", "A")
        dns.query.udp(query, "127.0.0.1", port=server.port, timeout=2.0)


def sampler_for(server: ServerProc, run_dir: Path, **cfg: object) -> PprofSampler:
    running = Running("refdns", "127.0.0.1", {"api": server.extra_ports["api"]}, server.pid, None)
    running.run_dir = run_dir
    return PprofSampler(
        PprofSamplerConfig(interval_s=10, token_env="REFDNS_TOKEN", **cfg),  # type: ignore[arg-type]
        lambda: running,
        environ={"REFDNS_TOKEN": TOKEN},
        background=False,
        profiles_dir=profiles_dir(run_dir),
    )


def test_the_diff_names_the_leak_and_profiles_outlive_the_target(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with (
        dnsmasq_upstream(tmp_path) as upstream,
        refdns(tmp_path / "data", "-leak", upstream_port=upstream.port) as server,
    ):
        sampler = sampler_for(server, run_dir)
        flood(server, 0, 100)
        assert [p.tags["kind"] for p in sampler.sample(0)] == ["profile"]
        flood(server, 100, 2100)
        assert [p.tags["kind"] for p in sampler.sample(10 * S)] == ["profile"]
    # the target has exited: what was captured is still there and whole
    pair = first_and_latest(profiles_dir(run_dir), "goroutine")
    assert pair is not None
    base, latest = (parse_profile(read_profile_text(p)) for p in pair)
    stacks = goroutine_stacks(base, latest)
    assert stacks[0].name.startswith("main.(*server).leakName.func1")
    assert stacks[0].delta == 2000
    heap_pair = first_and_latest(profiles_dir(run_dir), "heap")
    assert heap_pair is not None
    hb, hl = (parse_profile(read_profile_text(p)) for p in heap_pair)
    functions = heap_functions(hb, hl)
    assert functions[0].name == "main.(*server).leakName"
    assert functions[0].delta > 8 * 1024 * 1024  # ~2,000 x 16 KiB, estimated from samples
    assert heap_stacks(hb, hl)[0].name.startswith(
        "main.(*server).leakName < main.(*server).forward"
    )
    said = culprit("goroutines", goroutines=stacks)
    assert said is not None and "leakName.func1" in said and "+2,000 goroutines" in said


def test_no_token_and_a_wrong_path_are_one_event_each(tmp_path: Path) -> None:
    with refdns(tmp_path / "data") as server:
        for cfg, status in (({}, "HTTP 401"), ({"path": "/nothing/here"}, "HTTP 404")):
            sampler = sampler_for(server, tmp_path / status, **cfg)
            if status == "HTTP 401":
                sampler.headers = {}
            points = [p for t in range(0, 50, 10) for p in sampler.sample(t * S)]
            assert [p.tags["kind"] for p in points] == ["pprof_failed"], status
            assert status in str(points[0].fields["message"])
            assert sampler.failures == 5
            assert list_profiles(profiles_dir(tmp_path / status)) == []
