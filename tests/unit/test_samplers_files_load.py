import sqlite3
from pathlib import Path

import pytest

from soak.errors import InputError
from soak.load.supervised import load_points
from soak.points import Point
from soak.probes import DnsResult
from soak.samplers import build_samplers
from soak.samplers.api import call_headers, endpoint_name
from soak.samplers.dig import DigSampler, probe_name, probe_ok
from soak.samplers.files import FilesSampler
from soak.samplers.load import LoadSampler
from soak.samplers.selection import (
    DigProbeConfig,
    FilesSamplerConfig,
    HttpCallConfig,
    RowCountConfig,
    SamplersConfig,
)
from soak.samplers.target import TargetSampler
from soak.targets.base import Running


def running(data_dir: Path | None) -> Running:
    return Running("t", "127.0.0.1", {"dns": 53}, 1, None, data_dir=data_dir)


def make_db(path: Path, rows: int) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE queries (name TEXT)")
    db.executemany("INSERT INTO queries VALUES (?)", [(f"n{i}",) for i in range(rows)])
    db.commit()
    db.close()


def test_files_sizes_globs_missing_and_row_counts(tmp_path: Path) -> None:
    make_db(tmp_path / "querylog.db", 25)
    (tmp_path / "lists").mkdir()
    (tmp_path / "lists" / "a.txt").write_bytes(b"x" * 100)
    (tmp_path / "lists" / "b.txt").write_bytes(b"y" * 50)
    cfg = FilesSamplerConfig(
        paths=["querylog.db", "querylog.db-wal", "lists", "lists/*.txt", "nothing/*"],
        row_counts=[RowCountConfig(path="querylog.db", query="SELECT count(*) FROM queries")],
    )
    points = FilesSampler(cfg, lambda: running(tmp_path)).sample(7)
    got = {(p.tags["path"], k): v for p in points for k, v in p.fields.items()}
    assert got == {
        ("querylog.db", "bytes"): float((tmp_path / "querylog.db").stat().st_size),
        ("querylog.db-wal", "bytes"): 0.0,
        ("lists", "bytes"): 150.0,
        ("lists/a.txt", "bytes"): 100.0,
        ("lists/b.txt", "bytes"): 50.0,
        ("querylog.db", "rows"): 25.0,
    }
    assert all(p.measurement == "files" and p.time_ns == 7 for p in points)


def test_row_count_is_read_only_and_a_missing_db_is_an_event(tmp_path: Path) -> None:
    cfg = FilesSamplerConfig(
        row_counts=[RowCountConfig(path="absent.db", query="SELECT count(*) FROM queries")]
    )
    (point,) = FilesSampler(cfg, lambda: running(tmp_path)).sample(1)
    assert point.measurement == "event" and point.tags["kind"] == "files_error"
    assert not (tmp_path / "absent.db").exists()  # read-only open never creates it


def test_row_count_cannot_write(tmp_path: Path) -> None:
    make_db(tmp_path / "q.db", 3)
    cfg = FilesSamplerConfig(row_counts=[RowCountConfig(path="q.db", query="DELETE FROM queries")])
    (point,) = FilesSampler(cfg, lambda: running(tmp_path)).sample(1)
    assert point.tags["kind"] == "files_error"
    assert "readonly" in str(point.fields["message"]).replace("-", "").replace(" ", "").lower()


def test_files_without_data_dir_is_a_failure_but_not_running_is_nothing() -> None:
    sampler = FilesSampler(FilesSamplerConfig(paths=["x"]), lambda: running(None))
    with pytest.raises(RuntimeError):
        sampler.sample(1)
    assert FilesSampler(FilesSamplerConfig(paths=["x"]), lambda: None).sample(1) == []


ONE_ANSWER = "3500 3500 3500 1 I;eJy7xcTIwMAAAAUwAN4="  # a histogram of one 3.5-ms answer


def test_load_sampler_stamps_each_class_all_first() -> None:
    class Source:
        def take_points(self, time_ns: int) -> list[Point]:
            window = {
                "miss": {"sent": 10.0, "lat_p99_ms": 3.5},
                "all": {"sent": 30.0, "rcode_noerror": 29.0},
                "cached": {"sent": 20.0},
            }
            return load_points(
                window, {}, time_ns, {"miss": "3500 3500 3500 1 I;eJy7xcTIwMAAAAUwAN4="}
            )

    points = LoadSampler(Source()).sample(99)
    assert [p.tags["class"] for p in points] == ["all", "cached", "miss"]
    assert points[0] == Point("load", {"sent": 30.0, "rcode_noerror": 29.0}, 99, {"class": "all"})
    # each class's window histogram rides on its point, beside its counts
    assert points[2].fields["lat_hist"] == ONE_ANSWER


def test_load_sampler_writes_each_agents_part_apart_from_the_total() -> None:
    class Agents:
        def take_points(self, time_ns: int) -> list[Point]:
            agents = {1: {"all": {"sent": 14.0}}, 0: {"all": {"sent": 16.0}}}
            return load_points({"all": {"sent": 30.0}}, agents, time_ns, {})

    points = LoadSampler(Agents()).sample(7)
    assert [(p.measurement, p.tags) for p in points] == [
        ("load", {"class": "all"}),
        ("load", {"agent": "0", "class": "all"}),
        ("load", {"agent": "1", "class": "all"}),
    ]
    total = sum(p.fields["sent"] for p in points if "agent" in p.tags)
    assert total == points[0].fields["sent"]


def test_target_sampler_records_a_target_that_is_not_running() -> None:
    (event,) = TargetSampler(lambda: None).sample(5)
    assert event.tags["kind"] == "target_not_running" and event.time_ns == 5
    assert TargetSampler(lambda: running(None)).sample(5) == []


def test_dig_ok_needs_rcode_and_answer() -> None:
    probe = DigProbeConfig(name="www.example.test", answer="192.0.2.10")
    assert probe_name(probe) == "www.example.test/A"
    good = DnsResult(True, "NOERROR", answers=["192.0.2.10"])
    assert probe_ok(probe, good)
    assert not probe_ok(probe, DnsResult(True, "NOERROR", answers=["192.0.2.99"]))
    assert not probe_ok(probe, DnsResult(True, "SERVFAIL"))
    assert not probe_ok(probe, DnsResult(False, None, error="timeout"))
    nx = DigProbeConfig(name="nope.example.test", rcode="nxdomain")
    assert probe_ok(nx, DnsResult(True, "NXDOMAIN"))
    with pytest.raises(InputError):
        DigSampler([DigProbeConfig(name="x", rcode="NOPE")], lambda: None)


def test_http_headers_with_token_from_the_environment() -> None:
    call = HttpCallConfig(path="/api/v1/servers", token_env="PDNS_KEY", token_header="X-API-Key")
    assert endpoint_name(call) == "GET /api/v1/servers"
    assert call_headers(call, {"PDNS_KEY": "k"}) == {"X-API-Key": "k"}
    bearer = HttpCallConfig(path="/x", token_env="T", headers={"Accept": "a"})
    assert call_headers(bearer, {"T": "t"}) == {"Accept": "a", "Authorization": "Bearer t"}
    with pytest.raises(InputError, match="PDNS_KEY"):
        call_headers(call, {})


def test_build_samplers_from_config() -> None:
    class Source:
        def take_window(self) -> dict[str, dict[str, float]]:
            return {}

        def take_agent_windows(self) -> dict[int, dict[str, dict[str, float]]]:
            return {}

    cfg = SamplersConfig.model_validate(
        {
            "interval_s": "1s",
            "proc": {"tree": True},
            "prom": {"map": {"goroutines": "go_goroutines"}},
            "http": [{"path": "/x"}],
            "dig": [{"name": "a.test"}],
            "files": {"paths": ["db"]},
        }
    )
    names = [s.name for s in build_samplers(cfg, lambda: None, load_source=Source())]
    assert names == [
        "target",
        "proc",
        "prom",
        "http GET /x",
        "dig a.test/A",
        "files",
        "host",
        "load",
    ]
    assert [s.name for s in build_samplers(SamplersConfig(), lambda: None)] == [
        "target",
        "proc",
        "host",
    ]
    quiet = SamplersConfig(host=False)
    assert [s.name for s in build_samplers(quiet, lambda: None)] == ["target", "proc"]
    with pytest.raises(InputError):
        bad = SamplersConfig.model_validate({"prom": {"map": {"x": "avg(y)"}}})
        build_samplers(bad, lambda: None)
