import re
from pathlib import Path
from typing import Any

import pytest

from soak.errors import InputError
from soak.samplers.promexpr import map_samples, parse_expr, parse_samples, recorded_name

METRICS = Path(__file__).resolve().parent.parent / "fixtures" / "metrics"

KUDURRU_TEXT = """\
# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 113
# TYPE kudurru_querylog_dropped_total counter
kudurru_querylog_dropped_total{stage="queue"} 7
kudurru_querylog_dropped_total{stage="queue",node="b"} 5
kudurru_querylog_dropped_total{stage="write"} 100
"""


PDNS_AUTH_MAP = {
    "real_memory_bytes": "pdns_auth_real_memory_usage",
    "fd_usage": "pdns_auth_fd_usage",
    "version_info": 'max(pdns_auth_info{version=~"4\\\\..*"})',
    "nothing": "no_such_metric",
}
PDNS_RECURSOR_MAP = {
    "all": "sum(pdns_recursor_auth_rcode_answers)",
    "all_total": "sum(pdns_recursor_auth_rcode_answers_total)",
    "noerror": 'pdns_recursor_auth_rcode_answers{rcode="noerror"}',
    "not_noerror": 'max(pdns_recursor_auth_rcode_answers{rcode!="noerror"})',
}


def mapped(samples: list[Any], exprs: dict[str, str]) -> tuple[dict[str, float], list[str]]:
    """map_samples with each expression parsed, no record regex."""
    return map_samples(samples, {name: parse_expr(e) for name, e in exprs.items()}, None)


def test_pdns_server_metrics_mapping() -> None:
    samples = parse_samples((METRICS / "pdns-server.txt").read_text())
    fields, missing = mapped(samples, PDNS_AUTH_MAP)
    assert fields == {"real_memory_bytes": 65015808.0, "fd_usage": 14.0, "version_info": 1.0}
    assert missing == ["nothing"]


def test_pdns_recursor_label_filters_and_aggregation() -> None:
    samples = parse_samples((METRICS / "pdns-recursor.txt").read_text())
    # the page says `pdns_recursor_auth_rcode_answers`; the parser names counter samples _total
    name = "pdns_recursor_auth_rcode_answers_total"
    answers = [v for n, labels, v in samples if n == name]
    noerror = [v for n, labels, v in samples if n == name and labels["rcode"] == "noerror"]
    assert len(answers) > 10
    fields, missing = mapped(samples, PDNS_RECURSOR_MAP)
    assert missing == []
    assert fields["all"] == fields["all_total"] == sum(answers) > 0
    assert fields["noerror"] == noerror[0] == 1.0
    others = [v for n, labels, v in samples if n == name and labels["rcode"] != "noerror"]
    assert fields["not_noerror"] == max(others)


def test_counter_sum_with_label_filter_and_min_max() -> None:
    samples = parse_samples(KUDURRU_TEXT)
    exprs = {
        "goroutines": parse_expr("go_goroutines"),
        "querylog_dropped_total": parse_expr('sum(kudurru_querylog_dropped_total{stage="queue"})'),
        "most": parse_expr("max(kudurru_querylog_dropped_total)"),
        "least": parse_expr('min(kudurru_querylog_dropped_total{stage=~"q.*"})'),
        "others": parse_expr('sum(kudurru_querylog_dropped_total{stage!~"queue"})'),
    }
    fields, _ = map_samples(samples, exprs, None)
    assert fields == {
        "goroutines": 113.0,
        "querylog_dropped_total": 12.0,
        "most": 100.0,
        "least": 5.0,
        "others": 100.0,
    }


def test_record_regex_keeps_every_matching_series_as_is() -> None:
    samples = parse_samples(KUDURRU_TEXT)
    fields, _ = map_samples(samples, {}, re.compile("kudurru_.*"))
    assert fields == {
        "kudurru_querylog_dropped_total_stage_queue": 7.0,
        "kudurru_querylog_dropped_total_node_b_stage_queue": 5.0,
        "kudurru_querylog_dropped_total_stage_write": 100.0,
    }
    assert recorded_name("x", {}) == "x"


@pytest.mark.parametrize(
    "bad", ["", "sum(", "avg(x)", 'x{a="b"', "x{a=b}", 'x{a="b" c="d"}', 'x{a=~"("}', "1abc"]
)
def test_bad_expressions_are_input_errors(bad: str) -> None:
    with pytest.raises(InputError):
        parse_expr(bad)
