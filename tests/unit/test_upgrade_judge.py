"""Check verdicts from observed results: each says what was expected and what came back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter

from soak.probes import DnsResult, HttpResult
from soak.upgrade.config import Check
from soak.upgrade.judge import (
    FileFacts,
    api_record,
    dig_record,
    first_difference,
    judge_api,
    judge_command,
    judge_dig,
    judge_file,
    judge_log,
    judge_metric,
    judge_ready,
    judge_swap,
    judge_unchanged,
)

CHECK: TypeAdapter[Check] = TypeAdapter(Check)


def check(**fields: Any) -> Any:
    return CHECK.validate_python({"name": "c", **fields})


def http(status: int | None, body: Any = b"", headers: dict[str, str] | None = None) -> HttpResult:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return HttpResult(status, 1.0, len(raw), raw, headers or {}, None if status else "refused")


ZONE = {"name": "example.test.", "rrsets": [{"type": "A", "records": [{"content": "192.0.2.10"}]}]}


def test_api_status_500_message_quotes_the_body() -> None:
    verdict = judge_api(check(kind="api", path="/z"), http(500, b"Internal Server Error"))
    assert not verdict.ok
    assert verdict.message == "expected status 200; got status 500: Internal Server Error"


def test_api_no_response_and_any_2xx() -> None:
    assert "no response (refused)" in judge_api(check(kind="api", path="/"), http(None)).got
    assert judge_api(check(kind="api", path="/", status=None), http(204)).ok
    assert not judge_api(check(kind="api", path="/", status=None), http(302)).ok


def test_api_json_expectations() -> None:
    c = check(
        kind="api",
        path="/z",
        expect=[
            {"path": "$.name", "equals": "example.test."},
            {"path": "$.rrsets[*]", "count": 1},
            {"path": "$.rrsets[*].records[*].content", "contains": "192.0.2.10"},
            {"path": "$.nope", "exists": False},
        ],
    )
    assert judge_api(c, http(200, ZONE)).ok
    wrong = check(kind="api", path="/z", expect=[{"path": "$.rrsets[*]", "count": 3}])
    verdict = judge_api(wrong, http(200, ZONE))
    assert not verdict.ok and verdict.message == "expected $.rrsets[*] count 3; got 1"
    missing = check(kind="api", path="/z", expect=[{"path": "$.x", "equals": 1}])
    assert judge_api(missing, http(200, ZONE)).got == "nothing at that path"
    assert "not JSON" in judge_api(missing, http(200, b"<html>")).got


def test_api_header_and_number_text_equality() -> None:
    c = check(
        kind="api",
        path="/",
        header={"Content-Type": "json"},
        expect=[{"path": "$.serial", "equals": 10}],
    )
    ok = http(200, {"serial": "10"}, {"content-type": "application/json"})
    assert judge_api(c, ok).ok
    assert not judge_api(c, http(200, {"serial": "10"}, {"content-type": "text/html"})).ok


def dns(rcode: str | None, answers: list[str], ttls: list[int], flags: list[str]) -> DnsResult:
    return DnsResult(
        rcode is not None, rcode, answers, ttls, flags, 1.0, None if rcode else "timeout"
    )


def test_dig_verdicts() -> None:
    c = check(
        kind="dig", qname="www.x.test", answers=["192.0.2.77"], ttl_min=1, ttl_max=300, flags=["AA"]
    )
    assert judge_dig(c, dns("NOERROR", ["192.0.2.77"], [300], ["QR", "AA"])).ok
    assert "rcode NOERROR" in judge_dig(c, dns("NXDOMAIN", [], [], ["QR", "AA"])).expected
    assert not judge_dig(c, dns("NOERROR", ["192.0.2.78"], [300], ["QR", "AA"])).ok
    assert not judge_dig(c, dns("NOERROR", ["192.0.2.77"], [3600], ["QR", "AA"])).ok
    assert not judge_dig(c, dns("NOERROR", ["192.0.2.77"], [300], ["QR"])).ok
    assert "no reply (timeout)" in judge_dig(c, dns(None, [], [], [])).got
    nx = check(kind="dig", qname="gone.x.test", rcode="nxdomain")
    assert judge_dig(nx, dns("NXDOMAIN", [], [], ["QR"])).ok


def test_unchanged_ignores_keys_and_names_the_difference() -> None:
    before = api_record(http(200, [{"id": "a.", "serial": 1}, {"id": "b.", "serial": 1}]))
    after = api_record(http(200, [{"id": "a.", "serial": 2}, {"id": "b.", "serial": 1}]))
    assert judge_unchanged(
        check(kind="unchanged", snapshot="s", ignore=["serial"]), before, after
    ).ok
    verdict = judge_unchanged(check(kind="unchanged", snapshot="s"), before, after)
    assert not verdict.ok and verdict.got == "$.body[0].serial was 1, now 2"
    failed = api_record(http(500, b"Internal Server Error"))
    assert (
        "$.status was 200, now 500"
        in judge_unchanged(check(kind="unchanged", snapshot="s"), before, failed).got
    )


def test_dig_records_compare_as_sets() -> None:
    a = dig_record(dns("NOERROR", ["192.0.2.1", "192.0.2.2"], [60, 60], ["QR"]))
    b = dig_record(dns("NOERROR", ["192.0.2.2", "192.0.2.1"], [60, 60], ["QR", "AA"]))
    assert first_difference(a, b) is None
    c = dig_record(dns("NOERROR", ["192.0.2.2"], [60], ["QR"]))
    assert first_difference(a, c) == "$.answers had 2 items, now 1"


def test_log_absent_and_present() -> None:
    lines = ["started", "HTTP ISE for /zones: no such column: options", "ok"]
    verdict = judge_log(check(kind="log", pattern="(?i)HTTP ISE|error"), lines)
    assert not verdict.ok and "no such column: options" in verdict.got
    assert judge_log(check(kind="log", pattern="ERROR"), lines).ok
    assert judge_log(check(kind="log", pattern="^started$", present=True), lines).ok


METRICS = """# HELP pdns_auth_servfail_packets Number of servfails
# TYPE pdns_auth_servfail_packets counter
pdns_auth_servfail_packets 0
# TYPE q gauge
q{kind="udp"} 12
q{kind="tcp"} 3
"""


@pytest.mark.parametrize(
    ("fields", "ok", "got"),
    [
        ({"metric": "pdns_auth_servfail_packets", "value": 0}, True, "0"),
        ({"metric": "pdns_auth_servfail_packets_total", "value": 0}, True, "0"),
        ({"metric": "q", "labels": {"kind": "tcp"}, "op": ">", "value": 5}, False, "3"),
        ({"metric": "q", "labels": {"kind": "udp"}, "op": ">=", "value": 12}, True, "12"),
        ({"metric": "absent", "value": 1}, False, "no such sample"),
    ],
)
def test_metric(fields: dict[str, Any], ok: bool, got: str) -> None:
    verdict = judge_metric(check(kind="metric", **fields), METRICS)
    assert (verdict.ok, verdict.got) == (ok, got)


def test_ready_within() -> None:
    c = check(kind="ready_within", within_s="10s")
    assert judge_ready(c, 0.4).ok
    assert judge_ready(c, 12.5).message == "expected ready within 10 s; got 12.50 s"
    assert judge_ready(c, None).got == "never ready"


def test_file_owner_and_mode() -> None:
    c = check(kind="file", path="/d/state.db", owner=65532, mode="0640")
    good = FileFacts(True, 65532, 65532, "nonroot", "nonroot", 0o640)
    assert judge_file(c, good).ok
    root = FileFacts(True, 0, 0, "root", "root", 0o644)
    verdict = judge_file(c, root)
    assert not verdict.ok
    assert verdict.message == (
        "expected /d/state.db owner 65532, mode 0640; got owner root(0), group root(0), mode 0644"
    )
    assert judge_file(check(kind="file", path="/x", owner="nonroot"), good).ok
    assert not judge_file(c, FileFacts(False)).ok
    assert judge_file(check(kind="file", path="/x", exists=False), FileFacts(False)).ok


def test_swap_bounds() -> None:
    both = check(name="s", kind="swap", max_lost=10, max_gap_s=0.5)
    verdict = judge_swap(both, 3, 0.2, 1000)
    assert verdict.ok and verdict.got == "3 of 1000 lost, longest gap 0.200 s"
    assert verdict.expected == "at most 10 lost and no gap over 0.5 s"
    assert not judge_swap(both, 11, 0.2, 1000).ok
    assert not judge_swap(both, 3, 0.6, 1000).ok
    gap_only = check(name="s", kind="swap", max_gap_s=1)
    assert judge_swap(gap_only, 900, 0.9, 1000).ok
    never = judge_swap(gap_only, None, None)
    assert not never.ok and never.got == "no load ran through the swap"


def test_command_exit_output_and_line() -> None:
    plain = check(name="c", kind="command", argv=["true"])
    assert judge_command(plain, 0, "", "").ok
    failed = judge_command(plain, 2, "", "first\nunbound-checkconf: syntax error\n")
    assert not failed.ok and failed.got == "exit 2: unbound-checkconf: syntax error"
    wanted = check(
        name="c",
        kind="command",
        argv=["x"],
        stdout_contains=["no errors"],
        stdout_matches=r"^total\.num\.queries=[1-9]",
    )
    out = "unbound-checkconf: no errors\ntotal.num.queries=12\n"
    verdict = judge_command(wanted, 0, out, "")
    assert verdict.ok and verdict.got == "exit 0: total.num.queries=12"
    assert "a line matching" in verdict.expected
    assert not judge_command(wanted, 0, "no errors\ntotal.num.queries=0\n", "").ok
    assert judge_command(wanted, 0, "total.num.queries=3", "").got == (
        "exit 0, no 'no errors' in the output"
    )
