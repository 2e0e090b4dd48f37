"""The labelled leak corpus through the run's real leak pass (bench/leak_accuracy.py scores
all of it): no `growing` on a healthy series, every leak at or above its threshold found."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.analysis.scenario_sections import STARTUP_WINDOWS, LeaksConfig
from tests.support.leakcorpus import (
    Fixture,
    Label,
    Score,
    fixtures,
    from_warmup_end,
    load,
    save,
    score,
)

KiB = 1024
# What the default wait for start-up growth (leaks.startup_max_s, 24 windows) is for: judged
# at once (startup_max_s 0), each of these healthy series is `growing` for a while, with the
# reason (docs/benchmarks.md has the numbers).
_FILLING = (
    "a cache still filling for hours (replayed) after the warm-up rises like a leak above the"
    " threshold until it reaches its cap"
)
_SLOWING = (
    "a rise slowing toward its plateau at 5 to 1 x the threshold (an exponential approach):"
    " before its 9th or 10th window the bend is one noise could draw"
)
_STARTING = "start-up growth goes on past the warm-up, as a leak from the start would rise"
JUDGED_AT_ONCE_WRONG: dict[tuple[str, str], str] = {
    ("refdns-cache-cap", "rss_anon_bytes"): _FILLING,
    ("pdns-recursor-cache-cap", "rss_anon_bytes"): _FILLING,
    ("refdns-startup", "rss_anon_bytes"): _STARTING,
    ("refdns-startup", "heap_inuse_bytes"): _STARTING,
    ("refdns-settle", "rss_anon_bytes"): _SLOWING,
    ("refdns-settle", "heap_inuse_bytes"): _SLOWING,
}


def _cases() -> list[tuple[Fixture, str]]:
    return [(fx, r) for fx in fixtures() for r in fx.labels]


@pytest.fixture(scope="module")
def scores() -> dict[tuple[str, str], Score]:
    return {(s.fixture, s.resource): s for fx in fixtures() for s in score(fx)}


def test_the_corpus_holds_both_kinds() -> None:
    kinds = {lab.kind for fx, r in _cases() for lab in [fx.labels[r]]}
    assert kinds == {"leak", "healthy"}


def _params() -> list[object]:
    return [pytest.param(fx.name, r, id=f"{fx.name}-{r}") for fx, r in _cases()]


@pytest.mark.parametrize(("name", "resource"), _params())
def test_verdicts_on_the_corpus(
    name: str, resource: str, scores: dict[tuple[str, str], Score]
) -> None:
    s = scores[(name, resource)]
    assert s.judged_passes > 0, "never judged: the fixture is too short for the default windows"
    assert s.false_alarms == 0, f"`growing` in {s.false_alarms} passes: {s.verdicts}"
    if s.must_detect:
        assert s.detected, f"a leak of {s.true_per_hour:.4g}/h never `growing`: {s.verdicts}"


def _synthetic(label: Label, per_s: float) -> Fixture:
    """A flat 20 MiB with a 256 KiB sawtooth, then a linear rise from 150 s on."""
    values: list[float | None] = [
        20 * 1024 * KiB + (i % 7) * 256 * KiB / 7 + max(0.0, i - 150) * per_s for i in range(420)
    ]
    return Fixture(
        "synthetic", "test", 1.0, 60.0, 60.0, {"rss_anon_bytes": values}, {"rss_anon_bytes": label}
    )


def test_the_scorer_counts_a_false_alarm_per_pass() -> None:
    fx = _synthetic(Label("healthy", "flat"), 200 * KiB)
    (s,) = score(fx)
    assert s.false_alarms == s.growing_passes > 10


def test_the_scorer_times_a_detection_from_the_onset(tmp_path: Path) -> None:
    fx = _synthetic(Label("leak", "linear", 200 * KiB, 150.0), 200 * KiB)
    save(fx, tmp_path / "f.json")
    (s,) = score(load(tmp_path / "f.json"))  # through the file format too
    assert s.must_detect and s.detected
    assert s.detection_delay_s is not None and s.detection_delay_s > 0
    assert s.final == "growing"
    assert s.true_per_hour == pytest.approx(200 * KiB * 60)


@pytest.mark.parametrize("fx", [fx for fx in fixtures() if fx.caps], ids=lambda fx: fx.name)
def test_a_cache_filling_past_the_warm_up_under_its_declared_cap_is_levelling(
    fx: Fixture,
) -> None:
    for s in score(fx, declared_caps=True):
        assert s.false_alarms == 0, (s.resource, s.verdicts)
        if s.resource in fx.caps:
            assert "levelling" in s.verdicts


def test_judged_at_once_start_up_growth_is_called_a_leak() -> None:
    """With no wait for start-up growth (leaks.startup_max_s 0) the series that rise past
    the warm-up are `growing` for a while, and only those: what the default wait is for."""
    cfg = LeaksConfig(startup_max_s=0)
    wrong = {
        (s.fixture, s.resource)
        for fx in fixtures()
        for s in score(fx, cfg)
        if s.false_alarms or (s.must_detect and not s.detected)
    }
    assert wrong == set(JUDGED_AT_ONCE_WRONG)


def test_a_leak_from_the_warm_ups_end_is_found_once_the_wait_is_over() -> None:
    """A memory leak rising from the warm-up's end, with no accounting of the server's to
    tell it from a cache, is `not judged` while it may still be start-up growth (24
    windows by default), then `growing`; judged at once, it is found sooner. A count's
    leak (fds, goroutines) is a staircase that never falls back: found without the wait."""
    waited: list[float | None] = []
    at_once: list[float | None] = []
    stairs: list[float | None] = []
    for fx in filter(None, map(from_warmup_end, fixtures())):
        wait_s = STARTUP_WINDOWS * LeaksConfig().window_s / fx.time_scale  # recorded s
        for s in score(fx):
            if s.must_detect:
                assert s.detected, (s.fixture, s.resource, s.verdicts)
                delay = s.detection_delay_s and s.detection_delay_s - wait_s
                (waited if s.resource.endswith("_bytes") else stairs).append(delay)
        at_once += [
            s.detection_delay_s and s.detection_delay_s - wait_s
            for s in score(fx, LeaksConfig(startup_max_s=0))
            if s.must_detect
        ]
    assert waited and all(d is not None and d >= -1 for d in waited)  # its last tick
    assert stairs and all(d is not None and d < -60 for d in stairs)  # hours sooner
    assert at_once and all(d is not None and d < -60 for d in at_once)  # hours sooner
