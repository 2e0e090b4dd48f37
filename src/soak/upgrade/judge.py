"""Pure verdicts of the checks: what came back against what the plan expects.

Each `judge_*` takes a check and what was observed (an HTTP or DNS result,
snapshot records, log lines, metrics text, file facts) and returns a Verdict
with the expected and the observed value in words, so that the table, JUnit
and JSON can say "expected X; got Y". No I/O here.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from soak.probes import DnsResult, HttpResult
from soak.upgrade import jsonpath
from soak.upgrade.config.checks import (
    ApiCheck,
    CommandCheck,
    DigCheck,
    FileCheck,
    JsonExpect,
    LogCheck,
    MetricCheck,
    ReadyWithinCheck,
    SwapCheck,
    UnchangedCheck,
)

BODY_EXCERPT_CHARS = 300


@dataclass(frozen=True)
class Verdict:
    ok: bool
    expected: str
    got: str
    details: list[dict[str, Any]] | None = None  # every item, for the JSON (corpus)

    @property
    def message(self) -> str:
        return f"expected {self.expected}; got {self.got}"


def _short(value: Any, limit: int = BODY_EXCERPT_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "..."


def body_excerpt(result: HttpResult) -> str:
    return _short(result.body.decode(errors="replace").strip())


# ---------------------------------------------------------------- api


def status_ok(expected: int | None, status: int | None) -> bool:
    if status is None:
        return False
    return 200 <= status < 300 if expected is None else status == expected


def _status_words(expected: int | None) -> str:
    return "status 2xx" if expected is None else f"status {expected}"


def judge_json(expect: JsonExpect, doc: Any) -> Verdict:
    values = jsonpath.select(doc, expect.path)
    if "count" in expect.model_fields_set:
        return Verdict(
            len(values) == expect.count, f"{expect.path} count {expect.count}", f"{len(values)}"
        )
    if "exists" in expect.model_fields_set:
        return Verdict(
            bool(values) == expect.exists,
            f"{expect.path} {'present' if expect.exists else 'absent'}",
            "present" if values else "absent",
        )
    if "equals" in expect.model_fields_set:
        got = values[0] if len(values) == 1 else values
        ok = len(values) == 1 and _same(values[0], expect.equals)
        return Verdict(
            ok,
            f"{expect.path} == {_short(expect.equals)}",
            _short(got) if values else "nothing at that path",
        )
    ok = any(_contains(v, expect.contains) for v in values)
    return Verdict(
        ok,
        f"{expect.path} contains {_short(expect.contains)}",
        _short(values) if values else "nothing at that path",
    )


def _same(value: Any, expected: Any) -> bool:
    """YAML `equals: 10` against a JSON "10" is a mismatch of types a user did not mean."""
    if isinstance(value, str) and not isinstance(expected, str) and expected is not None:
        return value == str(expected)
    return bool(value == expected)


def _contains(value: Any, wanted: Any) -> bool:
    if isinstance(value, str) and isinstance(wanted, str):
        return wanted in value
    if isinstance(value, list):
        return any(_same(v, wanted) for v in value)
    return _same(value, wanted)


def judge_api(check: ApiCheck, result: HttpResult) -> Verdict:
    if result.status is None:
        return Verdict(False, _status_words(check.status), f"no response ({result.error})")
    if not status_ok(check.status, result.status):
        return Verdict(
            False, _status_words(check.status), f"status {result.status}: {body_excerpt(result)}"
        )
    for name, wanted in check.header.items():
        got = result.headers.get(name.lower())
        if got is None or wanted not in got:
            return Verdict(False, f"header {name} containing {wanted!r}", repr(got))
    if not check.expect:
        return Verdict(True, _status_words(check.status), f"status {result.status}")
    try:
        doc = result.json()
    except ValueError:
        return Verdict(False, "a JSON body", f"not JSON: {body_excerpt(result)}")
    for expect in check.expect:
        verdict = judge_json(expect, doc)
        if not verdict.ok:
            return verdict
    return Verdict(
        True,
        "; ".join(judge_json(e, doc).expected for e in check.expect),
        f"status {result.status}, as expected",
    )


# ---------------------------------------------------------------- dig


def _dig_got(result: DnsResult) -> str:
    if not result.ok_transport:
        return f"no reply ({result.error})"
    answers = ", ".join(result.answers) or "no answers"
    return f"{result.rcode} [{answers}] ttl {result.ttls} flags {' '.join(result.flags)}"


def judge_dig(check: DigCheck, result: DnsResult) -> Verdict:
    got = _dig_got(result)
    if not result.ok_transport:
        return Verdict(False, f"a reply with {check.rcode or 'any rcode'}", got)
    if check.rcode is not None and result.rcode != check.rcode.upper():
        return Verdict(False, f"rcode {check.rcode.upper()}", got)
    answers = {a.lower() for a in result.answers}
    if check.answers is not None and answers != {a.lower() for a in check.answers}:
        return Verdict(False, f"answers exactly {sorted(check.answers)}", got)
    missing = [a for a in check.contains if a.lower() not in answers]
    if missing:
        return Verdict(False, f"answers including {missing}", got)
    if check.ttl_min is not None and any(t < check.ttl_min for t in result.ttls):
        return Verdict(False, f"TTL >= {check.ttl_min}", got)
    if check.ttl_max is not None and any(t > check.ttl_max for t in result.ttls):
        return Verdict(False, f"TTL <= {check.ttl_max}", got)
    flags = {f.upper() for f in result.flags}
    lacking = [f for f in check.flags if f.upper() not in flags]
    if lacking:
        return Verdict(False, f"flags {check.flags}", got)
    return Verdict(True, "the expected answer", got)


# ---------------------------------------------------------------- unchanged


def api_record(result: HttpResult) -> dict[str, Any]:
    """What a snapshot keeps of an API answer: the status and the parsed body."""
    if result.status is None:
        return {"status": None, "error": result.error}
    try:
        body: Any = result.json()
    except ValueError:
        body = result.body.decode(errors="replace")
    return {"status": result.status, "body": body}


def dig_record(result: DnsResult) -> dict[str, Any]:
    """What a snapshot keeps of a DNS answer: rcode and the (TTL, rdata) set, sorted."""
    if not result.ok_transport:
        return {"rcode": None, "error": result.error}
    pairs = sorted(f"{ttl} {rdata}" for ttl, rdata in zip(result.ttls, result.answers, strict=True))
    return {"rcode": result.rcode, "answers": pairs}


def without_keys(value: Any, ignore: Iterable[str]) -> Any:
    ignored = set(ignore)
    if isinstance(value, dict):
        return {k: without_keys(v, ignored) for k, v in value.items() if k not in ignored}
    if isinstance(value, list):
        return [without_keys(v, ignored) for v in value]
    return value


_FIRST_KEYS = ("status", "rcode")


def first_difference(before: Any, after: Any, path: str = "$") -> str | None:
    """Where two JSON values first differ, in words; None when equal."""
    if isinstance(before, dict) and isinstance(after, dict):
        # The status or rcode first: "now 500" says more than the body that came with it.
        for key in sorted(set(before) | set(after), key=lambda k: (k not in _FIRST_KEYS, k)):
            if key not in after:
                return f"{path}.{key} missing after the upgrade"
            if key not in before:
                return f"{path}.{key} new after the upgrade: {_short(after[key], 80)}"
            diff = first_difference(before[key], after[key], f"{path}.{key}")
            if diff:
                return diff
        return None
    if isinstance(before, list) and isinstance(after, list):
        if len(before) != len(after):
            return f"{path} had {len(before)} items, now {len(after)}"
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            diff = first_difference(b, a, f"{path}[{i}]")
            if diff:
                return diff
        return None
    if before != after:
        return f"{path} was {_short(before, 120)}, now {_short(after, 120)}"
    return None


def judge_unchanged(check: UnchangedCheck, before: Any, after: Any) -> Verdict:
    b, a = without_keys(before, check.ignore), without_keys(after, check.ignore)
    diff = first_difference(b, a)
    if diff is None:
        return Verdict(True, f"{check.snapshot} as before the upgrade", "the same")
    return Verdict(False, f"{check.snapshot} as before the upgrade ({_short(b, 160)})", diff)


# ---------------------------------------------------------------- log, metric, ready, file


def judge_log(check: LogCheck, lines: Iterable[str]) -> Verdict:
    pattern = re.compile(check.pattern)
    matching: list[str] = []
    count = 0
    for line in lines:
        if pattern.search(line):
            count += 1
            if not matching:  # keep the first only: bounded memory on a long log
                matching.append(line)
    if check.present:
        got = _short(matching[0], 200) if matching else "no matching line"
        return Verdict(bool(matching), f"a log line matching /{check.pattern}/", got)
    got = f"{count} lines, first: {_short(matching[0], 400)}" if matching else "none"
    return Verdict(not matching, f"no log line matching /{check.pattern}/", got)


_OPS: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def metric_value(text: str, name: str, labels: dict[str, str]) -> float | None:
    """The first sample named `name` whose labels include `labels`; None if absent."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # The parser names a counter's sample NAME_total even where the text says NAME.
            named = sample.name == name or (family.name == name and sample.name == name + "_total")
            if named and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None


def judge_metric(check: MetricCheck, text: str) -> Verdict:
    expected = f"{check.metric} {check.op} {check.value:g}"
    try:
        value = metric_value(text, check.metric, check.labels)
    except ValueError as exc:
        return Verdict(False, expected, f"unreadable metrics text: {exc}")
    if value is None:
        return Verdict(False, expected, "no such sample")
    return Verdict(_OPS[check.op](value, check.value), expected, f"{value:g}")


def judge_ready(check: ReadyWithinCheck, ready_after_s: float | None) -> Verdict:
    expected = f"ready within {check.within_s:g} s"
    if ready_after_s is None:
        return Verdict(False, expected, "never ready")
    return Verdict(ready_after_s <= check.within_s, expected, f"{ready_after_s:.2f} s")


@dataclass(frozen=True)
class FileFacts:
    exists: bool
    uid: int | None = None
    gid: int | None = None
    user: str | None = None
    group: str | None = None
    mode: int | None = None  # permission bits


def _who(facts_id: int | None, facts_name: str | None) -> str:
    return f"{facts_name}({facts_id})" if facts_name else str(facts_id)


def judge_file(check: FileCheck, facts: FileFacts) -> Verdict:
    if not facts.exists or not check.exists:
        words = "exists" if check.exists else "absent"
        return Verdict(
            facts.exists == check.exists,
            f"{check.path} {words}",
            "exists" if facts.exists else "absent",
        )
    wanted: list[str] = []
    got = f"owner {_who(facts.uid, facts.user)}, group {_who(facts.gid, facts.group)}, " + (
        f"mode {facts.mode:04o}" if facts.mode is not None else "mode ?"
    )
    ok = True
    for label, want, fid, fname in (
        ("owner", check.owner, facts.uid, facts.user),
        ("group", check.group, facts.gid, facts.group),
    ):
        if want is None:
            continue
        wanted.append(f"{label} {want}")
        ok = ok and (str(want) == str(fid) or str(want) == fname)
    if check.mode is not None:
        wanted.append(f"mode {int(check.mode, 8):04o}")
        ok = ok and facts.mode == int(check.mode, 8)
    return Verdict(ok, f"{check.path} " + (", ".join(wanted) or "exists"), got)


# ---------------------------------------------------------------- swap under load


def judge_swap(check: SwapCheck, lost: int | None, gap_s: float | None, sent: int = 0) -> Verdict:
    """`lost`/`gap_s`: what the swap load saw (None: the load never ran)."""
    wanted = []
    if check.max_lost is not None:
        wanted.append(f"at most {check.max_lost} lost")
    if check.max_gap_s is not None:
        wanted.append(f"no gap over {check.max_gap_s:g} s")
    expected = " and ".join(wanted)
    if lost is None or gap_s is None:
        return Verdict(False, expected, "no load ran through the swap")
    ok = (check.max_lost is None or lost <= check.max_lost) and (
        check.max_gap_s is None or gap_s <= check.max_gap_s
    )
    return Verdict(ok, expected, f"{lost} of {sent} lost, longest gap {gap_s:.3f} s")


# ---------------------------------------------------------------- command


def judge_command(check: CommandCheck, exit_code: int, stdout: str, stderr: str) -> Verdict:
    wanted = [f"exit {check.exit_code}"]
    wanted += [f"output containing {text!r}" for text in check.stdout_contains]
    if check.stdout_matches is not None:
        wanted.append(f"a line matching /{check.stdout_matches}/")
    expected = ", ".join(wanted)
    last = (stderr or stdout).strip().splitlines()[-1:] or ["no output"]
    if exit_code != check.exit_code:
        return Verdict(False, expected, f"exit {exit_code}: {_short(last[0], 300)}")
    missing = [t for t in check.stdout_contains if t not in stdout]
    if missing:
        return Verdict(False, expected, f"exit {exit_code}, no {missing[0]!r} in the output")
    if check.stdout_matches is not None:
        pattern = re.compile(check.stdout_matches)
        line = next((ln for ln in stdout.splitlines() if pattern.search(ln)), None)
        if line is None:
            return Verdict(False, expected, f"exit {exit_code}, no line matches")
        return Verdict(True, expected, f"exit {exit_code}: {_short(line, 200)}")
    return Verdict(True, expected, f"exit {exit_code}")
