"""The report's "Runs as" line: a process target's argv with the run's ports filled in."""

from __future__ import annotations

from soak.placeholders import Placeholders, render_known
from soak.results.reportinput import filled_argv, shown_argv

ARGV = [
    "./refdns",
    "-dns=127.0.0.1:{port.dns}",
    "-data={data_dir}",
    "-upstream=127.0.0.1:{service.upstream.port.dns}",
    '-json={"a": 1}',
]


def test_ports_of_the_target_and_its_helpers_are_filled() -> None:
    state = {
        "target": {"host": "127.0.0.1", "ports": {"dns": 5301}, "data_dir": "/d", "run_dir": "/r"},
        "services": {
            "upstream": {
                "name": "upstream",
                "host": "127.0.0.1",
                "ports": {"dns": 5302},
                "pid": 1,
                "log_path": None,
            }
        },
    }
    assert filled_argv(ARGV, state) == [
        "./refdns",
        "-dns=127.0.0.1:5301",
        "-data=/d",
        "-upstream=127.0.0.1:5302",
        '-json={"a": 1}',
    ]


def test_a_run_that_never_started_keeps_the_placeholders() -> None:
    assert filled_argv(ARGV, {}) == ARGV


def test_render_known_leaves_unknown_ports() -> None:
    values = Placeholders(run_dir="/r", host="127.0.0.1", ports={"dns": 53})
    assert render_known("{port.dns} {port.api} {data_dir} {host}", values) == (
        "53 {port.api} {data_dir} 127.0.0.1"
    )


def test_a_long_argv_is_cut_between_arguments_never_inside_one() -> None:
    argv = ["unbound", "-d", "-c", "/a/very/long/path/" + "x" * 60 + "/unbound.conf", "-v"] + [
        f"--option-{i}=value-{i}" for i in range(20)
    ]
    shown = shown_argv(argv, max_chars=120)
    kept, _, rest = shown.partition(" ... ")
    assert len(kept) <= 120
    assert kept.split() == argv[: len(kept.split())]  # whole arguments only
    assert rest == f"({len(argv) - len(kept.split())} more arguments)"
    assert shown_argv(["unbound", "-c", "a b.conf"]) == "unbound -c 'a b.conf'"
