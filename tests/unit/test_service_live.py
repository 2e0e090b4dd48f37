"""The live view and `soak status` lines, from a status dict (pure rendering)."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from soak.service.live import criteria_lines, fmt_bytes, fmt_duration, render, summary_rows

STATUS = {
    "id": "r1",
    "status": "running",
    "phase": "steady",
    "elapsed_s": 3725.0,
    "remaining_s": 59.0,
    "rate_target_qps": 300.0,
    "rate_achieved_qps": 299.4,
    "lost": 3.0,
    "lost_ratio": 0.0001,
    "restarts": 1,
    "latest": {
        "process": {
            "rss_bytes": 31 * 1024**2,
            "rss_anon_bytes": 12 * 1024**2,
            "fds": 24,
            "threads": 3,
        },
        "runtime": {"goroutines": 113},
        "load,class=all": {"lat_p99_ms": 2.5, "rate_achieved": 299.4},
    },
    "verdicts": [
        {
            "resource": "rss_anon_bytes",
            "verdict": "growing",
            "slope_per_hour": 1e6,
            "p_value": 0.001,
        }
    ],
    "criteria": [
        {"name": "lost_ratio", "ok": True, "window": "run", "message": "3 of 30000 lost"},
        {"name": "p99_ms[all]", "ok": False, "window": "300 s to +0:10:00", "message": "9 ms"},
    ],
    "events": [{"time": "t", "kind": "exited", "message": "target killed by signal 9"}],
}


def test_summary_rows_pick_goroutines_when_present() -> None:
    rows = dict(summary_rows(STATUS))
    assert rows["elapsed / remaining"] == "1:02:05 / 0:59"
    assert rows["rate achieved / target (last second)"] == "299 / 300 q/s"
    assert rows["p99 (last second)"] == "2.50 ms"
    assert rows["RSS"] == "31.0 MiB" and rows["RSS (anon)"] == "12.0 MiB"
    assert rows["goroutines"] == "113"
    assert "threads" not in rows
    assert rows["lost"] == "3 (0.0100%)"


def test_an_ended_run_shows_whole_run_figures_labelled_as_such() -> None:
    ended = {
        **STATUS,
        "status": "passed",
        "ended": "2026-12-05T19:40:24+00:00",
        "load_totals": {"due": 6000, "sent": 5994, "seconds": 20.0},
        "p99_whole_run_ms": 6.35,
    }
    rows = dict(summary_rows(ended))
    assert rows["rate achieved / target (whole run)"] == "300 / 300 q/s"  # 299.7 of 300
    assert rows["p99 (whole run)"] == "6.35 ms"  # the run's, not the last second's 2.50


def test_threads_without_runtime_and_missing_values_are_dashes() -> None:
    rows = dict(summary_rows({"id": "r", "status": "pending"}))
    assert rows["threads"] == "-"
    assert rows["p99 (last second)"] == "-"
    assert rows["elapsed / remaining"] == "- / -"


def test_an_ended_run_shows_what_ran_of_what_was_planned_not_a_remainder() -> None:
    stopped = {"id": "r", "status": "stopped", "ended": "2026-12-05T19:00:00+00:00",
               "elapsed_s": 56.0, "duration_s": 120.0, "remaining_s": None}  # fmt: skip
    rows = dict(summary_rows(stopped))
    assert rows["ran / planned"] == "0:56 of 2:00"
    assert "elapsed / remaining" not in rows


def test_render_shows_verdicts_and_events() -> None:
    console = Console(record=True, width=120)
    console.print(render(STATUS))
    text = console.export_text()
    assert "growing" in text and "rss_anon_bytes" in text
    assert "killed by signal 9" in text


def test_criteria_lines_mark_failures() -> None:
    assert criteria_lines(STATUS) == [
        "pass  lost_ratio: 3 of 30000 lost",
        "FAIL  p99_ms[all] [300 s to +0:10:00]: 9 ms",
    ]


def test_criteria_lines_never_show_a_criterion_without_data_as_a_pass() -> None:
    status = {
        "criteria": [
            {"name": "leak[fds]", "ok": False, "judged": False, "message": "too few windows"}
        ]
    }
    assert criteria_lines(status) == ["not judged  leak[fds]: too few windows"]


def test_formats() -> None:
    assert fmt_duration(None) == "-"
    assert fmt_duration(59.9) == "0:59"
    assert fmt_bytes(512) == "512 B"
    assert fmt_bytes(1536) == "1.5 KiB"


def test_progress_line_is_one_plain_line_and_none_before_the_first_tick() -> None:
    from soak.service.live import progress_line

    assert progress_line({"id": "r1", "elapsed_s": 0.0, "latest": {}}) is None
    assert progress_line({"id": "r1", "elapsed_s": 2.0, "latest": {}}) is None
    line = progress_line(STATUS)
    assert line == (
        "soak: r1: +1:02:05 (0:59 left), phase steady, lost 3 (0.0100%),"
        " last second: rate 299 of 300 q/s, p99 2.50 ms, restarts 1"
    )


def test_without_a_terminal_the_foreground_prints_progress_lines_at_an_interval(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Not a table that wraps, and no `- / 0 q/s` line before anything was measured."""
    import threading

    from soak.service.foreground import _watch

    finished, stop = threading.Event(), threading.Event()
    calls = iter(range(1000))

    class Manager:
        def status(self, run_id: str) -> dict[str, Any]:
            n = next(calls)
            if n == 0:
                return {"id": run_id, "elapsed_s": 0.0, "latest": {}}
            if n >= 3:
                finished.set()
            return {**STATUS, "id": run_id}

    _watch(Manager(), "r1", finished, stop, Console(stderr=True), 0.05)  # type: ignore[arg-type]
    err = capsys.readouterr().err.splitlines()
    assert len(err) >= 2 and all(line.startswith("soak: r1: +1:02:05") for line in err), err
    assert not any("- / 0" in line for line in err)
