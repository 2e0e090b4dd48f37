"""Prometheus metric mapping: expressions and their evaluation over parsed samples (pure).

An expression is a selector `name` or `name{label="v", other!="w", x=~"re"}`,
optionally inside `sum(...)`, `max(...)` or `min(...)`. A bare selector that
matches several series is summed (counters split by label add up); one that
matches none gives no value, and the sampler records the field as missing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from soak.errors import InputError

_EXPR_RE = re.compile(r"^\s*(?:(sum|max|min)\s*\(\s*(.*?)\s*\)|(.*?))\s*$", re.DOTALL)
_SELECTOR_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(.*)\})?$", re.DOTALL)
_MATCHER_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')

Sample = tuple[str, dict[str, str], float]  # name, labels, value


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str

    def matches(self, labels: dict[str, str]) -> bool:
        actual = labels.get(self.label, "")
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        found = re.fullmatch(self.value, actual) is not None
        return found if self.op == "=~" else not found


@dataclass(frozen=True)
class Expr:
    agg: str  # sum, max, min
    name: str
    matchers: tuple[Matcher, ...]

    def evaluate(self, samples: Iterable[Sample]) -> float | None:
        samples = list(samples)
        values = self._values(samples, self.name)
        if not values:
            # The parser names every counter sample `<name>_total`, even when the page
            # says `<name>` (pdns does): accept the name as the page shows it.
            alt = (
                self.name[: -len("_total")]
                if self.name.endswith("_total")
                else f"{self.name}_total"
            )
            values = self._values(samples, alt)
        if not values:
            return None
        if self.agg == "max":
            return max(values)
        if self.agg == "min":
            return min(values)
        return sum(values)

    def _values(self, samples: list[Sample], wanted: str) -> list[float]:
        return [
            value
            for name, labels, value in samples
            if name == wanted and all(m.matches(labels) for m in self.matchers)
        ]


def _unescape(value: str) -> str:
    return re.sub(r'\\([\\"])', r"\1", value)


def _parse_matchers(text: str, expr: str) -> tuple[Matcher, ...]:
    matchers, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _MATCHER_RE.match(text, pos)
        if m is None:
            raise InputError(f"prom map: cannot read label matchers in {expr!r}")
        label, op, value = m.group(1), m.group(2), _unescape(m.group(3))
        if op in ("=~", "!~"):
            try:
                re.compile(value)
            except re.error as exc:
                raise InputError(f"prom map: bad regex {value!r} in {expr!r}: {exc}") from exc
        matchers.append(Matcher(label, op, value))
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise InputError(f"prom map: expected ',' between matchers in {expr!r}")
            pos += 1
    return tuple(matchers)


def parse_expr(expr: str) -> Expr:
    """`go_goroutines`, `sum(x_total{stage="queue"})`, `max(y{a=~"b.*"})` -> Expr."""
    m = _EXPR_RE.match(expr)
    inner = (m.group(2) if m and m.group(1) else m.group(3) if m else None) or ""
    sel = _SELECTOR_RE.match(inner.strip())
    if m is None or sel is None:
        raise InputError(
            f"prom map: not an expression {expr!r}"
            ' (use name, name{label="v"}, sum(...), max(...) or min(...))'
        )
    return Expr(m.group(1) or "sum", sel.group(1), _parse_matchers(sel.group(2) or "", expr))


def parse_samples(text: str) -> list[Sample]:
    """Every sample of a Prometheus text exposition, by the official parser."""
    return [
        (s.name, dict(s.labels), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


_FIELD_CHARS_RE = re.compile(r"[^A-Za-z0-9_]+")


def recorded_name(name: str, labels: dict[str, str]) -> str:
    """A field name for a series recorded as is: the name, then its labels in order."""
    if not labels:
        return name
    parts = [name] + [f"{k}_{v}" for k, v in sorted(labels.items())]
    return _FIELD_CHARS_RE.sub("_", "_".join(parts)).strip("_")


def map_samples(
    samples: list[Sample], exprs: dict[str, Expr], record: re.Pattern[str] | None
) -> tuple[dict[str, float], list[str]]:
    """(fields, names of mapped fields that matched nothing)."""
    fields: dict[str, float] = {}
    missing: list[str] = []
    if record is not None:
        for name, labels, value in samples:
            if record.fullmatch(name):
                fields[recorded_name(name, labels)] = value
    for field_name, expr in exprs.items():
        mapped = expr.evaluate(samples)
        if mapped is None:
            missing.append(field_name)
        else:
            fields[field_name] = mapped
    return fields, missing
