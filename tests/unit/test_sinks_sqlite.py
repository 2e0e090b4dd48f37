from pathlib import Path

import pytest

from soak.points import Point
from soak.sinks import sqlite as sqlite_module
from soak.sinks.sqlite import SqliteStore

RUN = {"soak": "r1", "scenario": "s", "target": "t", "version": "v1"}


def p(measurement: str, t: int, fields: dict, **tags: str) -> Point:
    return Point(measurement, fields, t, {**RUN, **tags})


def test_series_per_tag_set_time_ordered(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "points.db")
    store.write([p("api", 20, {"latency_ms": 2.0}, endpoint="GET /a")])
    store.write(
        [
            p("api", 10, {"latency_ms": 1.0, "ok": True}, endpoint="GET /a"),
            p("api", 10, {"latency_ms": 5.0}, endpoint="GET /b"),
        ]
    )
    series = store.series("r1", "api", "latency_ms")
    assert [(tags["endpoint"], values) for tags, values in series] == [
        ("GET /a", [(10, 1.0), (20, 2.0)]),
        ("GET /b", [(10, 5.0)]),
    ]
    only_b = store.series("r1", "api", "latency_ms", {"endpoint": "GET /b"})
    assert [t["endpoint"] for t, _ in only_b] == ["GET /b"]
    assert store.series("r2", "api", "latency_ms") == []
    store.close()


def test_load_agents_parts_are_read_only_where_asked_for(tmp_path: Path) -> None:
    """The run's total and each agent's part are all `load`; a read of the total (no
    `agent` in the filter, points() by default) never sees the parts, so nothing is
    counted twice."""
    store = SqliteStore(tmp_path / "points.db")
    store.write(
        [
            p("load", 1, {"sent": 30.0}, **{"class": "all"}),
            p("load", 1, {"sent": 16.0}, **{"class": "all", "agent": "0"}),
            p("load", 1, {"sent": 14.0}, **{"class": "all", "agent": "1"}),
        ]
    )
    (total,) = store.series("r1", "load", "sent", {"class": "all"})
    assert total[1] == [(1, 30.0)]
    assert [v for _, v in store.series("r1", "load", "sent")] == [[(1, 30.0)]]
    one = store.series("r1", "load", "sent", {"class": "all", "agent": "1"})
    assert [(t["agent"], v) for t, v in one] == [("1", [(1, 14.0)])]
    assert [x.fields["sent"] for x in store.points("r1", "load")] == [30.0]
    parts = list(store.points("r1", "load", agents=True))
    assert sorted((x.tags["agent"], x.fields["sent"]) for x in parts) == [("0", 16.0), ("1", 14.0)]
    store.close()


def test_points_roundtrip_and_latest(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "points.db")
    written = [
        p("process", 1, {"rss_bytes": 100.0, "fds": 7.0}),
        p("event", 2, {"message": "target restarted", "value": 1.0}, kind="restart"),
        p("process", 3, {"rss_bytes": 120.0, "fds": 8.0}),
        Point("process", {"rss_bytes": 1.0}, 4, {**RUN, "soak": "other"}),
    ]
    store.write(written)
    assert list(store.points("r1")) == written[:3]
    assert list(store.points("r1", "process", since_ns=2)) == [written[2]]
    assert store.latest("r1", "process", "rss_bytes") == 120.0
    assert store.latest("r1", "event", "message") == "target restarted"
    assert store.latest("r1", "dig", "ok") is None
    assert store.soaks() == ["r1", "other"]
    store.close()


def test_same_point_twice_is_stored_once_and_readable_from_another_connection(
    tmp_path: Path,
) -> None:
    path = tmp_path / "points.db"
    store = SqliteStore(path)
    point = p("dig", 5, {"latency_ms": 0.5, "rcode": 0.0}, probe="www.example.test/A")
    store.write([point])
    store.write([point])
    reader = SqliteStore(path)
    assert list(reader.points("r1")) == [point]
    assert reader.series("r1", "dig", "latency_ms")[0][1] == [(5, 0.5)]
    reader.close()
    store.close()


def test_non_finite_values_are_left_out(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "points.db")
    store.write([p("load", 1, {"lat_p99_ms": float("nan"), "sent": 3.0}, **{"class": "all"})])
    assert list(store.points("r1")) == [p("load", 1, {"sent": 3.0}, **{"class": "all"})]
    store.close()


def test_points_are_read_in_pages_without_losing_or_splitting_any(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "_PAGE_ROWS", 7)  # pages end inside points
    store = SqliteStore(tmp_path / "points.db")
    written = [
        p("x", i // 2, {"a": float(i), "b": "text", "c": 1.0}, k=str(i % 2)) for i in range(50)
    ]
    store.write(written)
    assert list(store.points("r1")) == sorted(written, key=lambda q: (q.time_ns, q.tags["k"]))
    assert len(list(store.points("r1", since_ns=20))) == 10
    store.close()


def test_run_bytes_share_the_file_by_samples(tmp_path: Path) -> None:
    """Each run's bytes are its share of the samples of the file's used bytes: two runs of
    1 and 3 parts split it 1:3, they add up to the file, and a run with no points is 0."""
    store = SqliteStore(tmp_path / "points.db")
    fields = {f"f{i}": float(i) for i in range(10)}
    for t in range(400):
        store.write([Point("process", fields, t, {**RUN, "soak": "small"})])
        big = [Point("process", fields, t, {**RUN, "soak": "big", "k": str(k)}) for k in range(3)]
        store.write(big)
    small_bytes, small_samples = store.run_bytes("small")
    big_bytes, big_samples = store.run_bytes("big")
    assert (small_samples, big_samples) == (4_000, 12_000)
    assert big_bytes == pytest.approx(3 * small_bytes, rel=1e-3)
    assert small_bytes + big_bytes == pytest.approx(store.used_bytes(), abs=1)
    assert store.run_bytes("none") == (0, 0)
    store.close()


def test_a_swap_s_new_version_tag_continues_the_same_series(tmp_path: Path) -> None:
    """A soak's swap changes the `version` tag mid-run: the readers of a run's series
    (leak verdicts' window minima, figures) see one series across it, not the old
    version's alone; another tag still makes another series."""
    store = SqliteStore(tmp_path / "points.db")
    s = 1_000_000_000
    store.write([p("process", t * s, {"rss_bytes": float(100 + t)}) for t in range(10)])
    store.write(
        [p("process", t * s, {"rss_bytes": float(100 + t)}, version="v2") for t in range(10, 20)]
    )
    store.write([p("process", 5 * s, {"rss_bytes": 1.0}, target="other")])
    (one, other) = store.series("r1", "process", "rss_bytes")
    assert one[0]["version"] == "v1" and other[0]["target"] == "other"
    assert [t for t, _ in one[1]] == [t * s for t in range(20)]
    minima = store.window_minima("r1", "process", "rss_bytes", 0, 5.0)
    assert minima is not None and [m for _, m in minima] == [100.0, 105.0, 110.0, 115.0]
    store.write(
        [p("process", t * s, {"rss_bytes": float(100 + t)}, version="v2") for t in range(20, 26)]
    )
    again = store.window_minima("r1", "process", "rss_bytes", 0, 5.0)
    assert again is not None and [m for _, m in again] == [100.0, 105.0, 110.0, 115.0, 120.0]
    v2 = store.series("r1", "process", "rss_bytes", {"version": "v2"})
    assert [len(values) for _, values in v2] == [16]
    store.close()
