"""Reading dnsperf's summary into the common result shape (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.errors import InputError, SoakError
from soak.load.dnsperf import dnsperf_argv, parse_output, query_file, result_from_output
from soak.load.load_config import LoadConfig

OUTPUT = """DNS Performance Testing Tool
Version 2.10.0

[Status] Command line: dnsperf -s 127.0.0.1 -p 40985 -d q.txt -m tcp -Q 2000 -l 3 -c 4
[Status] Testing complete (time limit)

Statistics:

  Queries sent:         6000
  Queries completed:    5990 (99.83%)
  Queries lost:         10 (0.17%)

  Response codes:       NOERROR 5000 (83.47%), NXDOMAIN 990 (16.53%)
  Average packet size:  request 35, response 54
  Run time (s):         3.000178
  Queries per second:   1996.548340

  Average Latency (s):  0.000070 (min 0.000029, max 0.003131)
  Latency StdDev (s):   0.000103

Connection Statistics:

  Reconnections:        0

  Average Latency (s):  0.001615 (min 0.001100, max 0.001893)
  Latency StdDev (s):   0.000365
"""


def test_parse_summary() -> None:
    parsed = parse_output(OUTPUT)
    assert parsed["sent"] == 6000 and parsed["completed"] == 5990 and parsed["lost"] == 10
    assert parsed["rcodes"] == {"NOERROR": 5000, "NXDOMAIN": 990}
    assert parsed["avg_s"] == 0.00007 and parsed["max_s"] == 0.003131  # not the connection block
    result = result_from_output(parsed, 2000.0, 3.0)
    d = result.to_json_dict()
    assert d["engine"] == "dnsperf" and d["qps"] == pytest.approx(5990 / 3, abs=0.01)
    assert d["latency_ms"]["avg"] == 0.07 and d["latency_ms"]["min"] == 0.029
    assert d["latency_ms"]["p99"] is None and d["latency_ms"]["stddev"] == 0.103
    assert d["sent"] == d["completed"] + d["lost"]
    assert not d["generator_bound"]


def test_no_statistics_is_an_error() -> None:
    with pytest.raises(SoakError, match="no statistics"):
        parse_output("Error: could not open datafile\n")


def test_query_file_normalises_bare_names(tmp_path: Path) -> None:
    cfg = LoadConfig(mix=[{"name": "q", "queries": ["a.test", "b.test aaaa"]}])
    path = query_file(cfg, tmp_path, tmp_path, 10)
    assert path.read_text() == "a.test A\nb.test AAAA\n"
    rand = LoadConfig(seed=3, mix=[{"name": "m", "random": {"zone": "x.test", "label_length": 5}}])
    lines = query_file(rand, tmp_path, tmp_path, 4).read_text().splitlines()
    assert len(lines) == 4 and len(set(lines)) == 4 and lines[0].endswith(".x.test A")


def test_mix_and_expectations_are_refused(tmp_path: Path) -> None:
    two = LoadConfig(mix=[{"name": "a", "queries": ["a.test"]}, {"name": "b", "queries": ["b"]}])
    with pytest.raises(InputError, match="one query class"):
        query_file(two, tmp_path, tmp_path, 1)
    exp = LoadConfig(mix=[{"name": "a", "queries": ["a.test"], "expect": {"rcodes": ["NOERROR"]}}])
    with pytest.raises(InputError, match="cannot check answers"):
        query_file(exp, tmp_path, tmp_path, 1)


def test_argv_maps_the_settings(tmp_path: Path) -> None:
    cfg = LoadConfig(
        protocol="tcp", flows=4, workers=2, timeout_s=1.5, mix=[{"name": "a", "queries": ["a"]}]
    )
    argv = dnsperf_argv(cfg, "127.0.0.1", 5300, tmp_path / "q", 30, 2000)
    joined = " ".join(argv[1:])
    assert "-s 127.0.0.1 -p 5300" in joined and "-l 30" in joined and "-Q 2000" in joined
    assert "-m tcp" in joined and "-c 4" in joined and "-T 2" in joined and "-t 1.5" in joined
    assert "-Q" not in dnsperf_argv(cfg, "127.0.0.1", 53, tmp_path / "q", 5, 0)
    # a knee step's rate halves down to 1,062.5: dnsperf refuses that, whole q/s it takes
    halved = dnsperf_argv(cfg, "127.0.0.1", 53, tmp_path / "q", 5, 1062.5)
    assert halved[halved.index("-Q") + 1] == "1062"
