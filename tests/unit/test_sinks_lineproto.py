from soak.points import Point
from soak.sinks.lineproto import encode_lines, encode_point


def test_numbers_are_floats_and_tags_sorted_and_escaped() -> None:
    p = Point(
        "api",
        {"latency_ms": 1.5, "status": 200, "ok": True, "bytes": 0},
        1_700_000_000_000_000_000,
        {"soak": "r1", "endpoint": "GET /stats, top=1"},
    )
    assert encode_point(p) == (
        r"api,endpoint=GET\ /stats\,\ top\=1,soak=r1 latency_ms=1.5,status=200.0,ok=1.0,bytes=0.0"
        " 1700000000000000000"
    )


def test_strings_are_quoted_and_escaped() -> None:
    p = Point("event", {"message": 'say "hi"\\now\nnext', "value": 1.0}, 5, {"kind": "x y"})
    assert encode_point(p) == r'event,kind=x\ y message="say \"hi\"\\now\nnext",value=1.0 5'


def test_non_finite_and_empty_values_are_left_out() -> None:
    nan_only = Point("load", {"lat_p99_ms": float("nan")}, 1, {"class": "all"})
    assert encode_point(nan_only) is None
    mixed = Point("load", {"a": float("inf"), "b": 2.0}, 1, {"class": "", "x": "y"})
    assert encode_point(mixed) == "load,x=y b=2.0 1"
    assert list(encode_lines([nan_only, mixed])) == ["load,x=y b=2.0 1"]


def test_a_window_s_histogram_stays_in_the_embedded_store() -> None:
    # InfluxDB gets the window's percentiles; its histogram text is the store's, for merging
    p = Point(
        "load",
        {"lat_p99_ms": 1.25, "lat_hist": "900 1250 2150 2 I;eJx7yGjNwMjAAMYADP0BIA=="},
        7,
        {},
    )
    assert encode_point(p) == "load lat_p99_ms=1.25 7"
