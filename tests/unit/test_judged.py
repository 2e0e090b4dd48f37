"""The criteria counted once, by name, with why each not judged was not: the one count the
run's message (result.json, `soak status`, `soak list`) and the report's headline read."""

from __future__ import annotations

from typing import Any

from soak.analysis.judged import CriterionResult, leak_why, so_far, tally
from soak.analysis.leaks import LeakVerdict


def crit(name: str, ok: bool, judged: bool = True, why: str = "", window: str = "run") -> Any:
    return CriterionResult(name, ok, 1.0 if judged else None, 2.0, window, "m", judged, why)


def test_a_criterion_failed_over_the_run_and_in_its_worst_window_counts_once() -> None:
    counted = tally(
        [
            crit("lost_ratio", False),
            crit("lost_ratio", False, window="300 s to +0:10:00"),
            crit("p99_ms[all]", True),
            crit("p99_ms[all]", False, window="300 s to +0:20:00"),  # its window failed
            crit("restarts", True),
            crit("leak[fds]", False, judged=False, why="too few windows (3)"),
        ]
    )
    assert counted.counts() == (
        "2 of 4 criteria failed: lost_ratio, p99_ms[all]; 1 not judged: leak[fds] (too few"
        " windows (3))"
    )
    # The same count from result.json's dicts.
    as_dicts = [{"name": "lost_ratio", "ok": False}, {"name": "restarts", "ok": True}]
    assert tally(as_dicts).counts() == "1 of 2 criteria failed: lost_ratio"


def test_not_judged_names_are_grouped_by_why() -> None:
    wait = "the leak start-up wait"
    counted = tally(
        [
            crit("restarts", True),
            crit("leak[rss_anon_bytes]", False, judged=False, why=wait),
            crit("leak[heap_inuse_bytes]", False, judged=False, why=wait),
            crit("leak[fds]", False, judged=False, why="too few windows (2)"),
        ]
    )
    assert counted.counts() == (
        "1 of 4 criteria pass, 3 not judged: leak[rss_anon_bytes], leak[heap_inuse_bytes]"
        " (the leak start-up wait), leak[fds] (too few windows (2))"
    )
    assert tally([crit("restarts", True)]).counts() == "all 1 criterion pass"


def test_why_a_leak_verdict_is_not_judged_is_its_true_reason() -> None:
    def v(windows: int, note: str = "") -> LeakVerdict:
        return LeakVerdict("rss_anon_bytes", "insufficient", 0.0, 1.0, windows, 1e6, note=note)

    startup = "not judged yet: rising since the warm-up's end ... (leaks.startup_max_s)"
    assert leak_why(v(8, startup)).startswith("the leak start-up wait (leaks.startup_max_s)")
    span = "not judged yet: the windows span less than leaks.min_span_s"
    assert leak_why(v(8, span)) == "the windows span less than leaks.min_span_s"
    assert leak_why(v(3)) == "too few windows (3, fewer than leaks.min_windows)"
    assert leak_why(v(0)).startswith("no samples")
    assert leak_why(v(9, "not judged yet: something else")) == "something else"


def test_a_running_run_has_not_failed_what_has_no_samples_yet() -> None:
    missing = CriterionResult("lost_ratio", False, None, 0.001, "run", "no load samples")
    failing = CriterionResult("restarts", False, 1, 0, "run", "1 target restart(s)")
    pending, still_failing = so_far([missing, failing])
    assert (pending.judged, pending.why) == (False, "not judged yet")
    assert pending.message == "not judged yet: no load samples"
    assert still_failing == failing  # with data: a failure so far
