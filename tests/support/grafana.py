"""The InfluxQL queries of soak's Grafana dashboards and alert rules, and Grafana's macros.

Used by the dashboard unit tests (names, layout, datasources) and by the integration
test that runs every query against a real InfluxDB after a real soak.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from soak.names import SERIES
from soak.points import RUN_TAGS

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "grafana"
DASHBOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
ALERT_RULES = GRAFANA / "provisioning" / "alerting" / "soak-rules.yaml"
DATASOURCES = GRAFANA / "provisioning" / "datasources"
EXPR_UID = "__expr__"


@dataclass(frozen=True)
class Query:
    where: str  # e.g. "soak.json panel 3 'Rcodes' A"
    text: str
    kind: str  # "panel", "variable", "annotation", "alert"


def load_dashboard(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def load_alert_rules() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(ALERT_RULES.read_text())
    return data


def all_panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Top-level panels and the panels of collapsed rows."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def dashboard_queries(path: Path) -> list[Query]:
    d = load_dashboard(path)
    out: list[Query] = []
    for panel in all_panels(d):
        for t in panel.get("targets", []):
            if t.get("datasource", {}).get("uid") == EXPR_UID:
                continue
            where = f"{path.name} panel {panel['id']} {panel['title']!r} {t['refId']}"
            out.append(Query(where, t["query"], "panel"))
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            out.append(Query(f"{path.name} variable {v['name']}", v["query"], "variable"))
    for a in d.get("annotations", {}).get("list", []):
        if "query" in a:
            out.append(Query(f"{path.name} annotation {a['name']}", a["query"], "annotation"))
    return out


def alert_queries() -> list[Query]:
    out = []
    for group in load_alert_rules()["groups"]:
        for rule in group["rules"]:
            for item in rule["data"]:
                if item["datasourceUid"] != EXPR_UID:
                    where = f"alert {rule['uid']} {item['refId']}"
                    out.append(Query(where, item["model"]["query"], "alert"))
    return out


def every_query() -> list[Query]:
    return [q for p in DASHBOARDS for q in dashboard_queries(p)] + alert_queries()


# ---------------------------------------------------------------- Grafana's macros

# Grafana's escapeRegex (grafana-data), used for single-valued variables in InfluxQL.
_REGEX_SPECIAL = re.compile(r"[\\^$*+?.()|\[\]{}/]")


def regex_escape(value: str) -> str:
    return _REGEX_SPECIAL.sub(lambda m: "\\" + m.group(0), value)


def render_variable(values: Sequence[str]) -> str:
    """A variable's value as Grafana's InfluxDB datasource interpolates it: regex-escaped
    values joined by `|` (our queries wrap each variable in a group: /^($var)$/)."""
    return "|".join(regex_escape(v) for v in values)


def time_filter(from_ns: int | None = None, to_ns: int | None = None, relative: str = "6h") -> str:
    """`$timeFilter`: `time >= now() - 6h` for a relative range, ms bounds for an absolute one."""
    if from_ns is None:
        return f"time >= now() - {relative}"
    start = f"time >= {from_ns // 1_000_000}ms"
    return start if to_ns is None else f"{start} and time <= {-(-to_ns // 1_000_000)}ms"


def expand(
    text: str, variables: Mapping[str, Sequence[str]], timefilter: str, interval: str = "10s"
) -> str:
    """The query Grafana sends: $timeFilter, $__interval and the template variables."""
    out = text.replace("$timeFilter", timefilter).replace("$__interval", interval)
    # Longest names first, so that $version is not taken for $ver + "sion".
    for name in sorted(variables, key=len, reverse=True):
        rendered = render_variable(variables[name])
        out = out.replace("${" + name + "}", rendered).replace("$" + name, rendered)
    return out


def variables_used(text: str) -> set[str]:
    names = set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", text))
    return names - {"timeFilter", "__interval", "__interval_ms"}


# ---------------------------------------------------------------- names


_STRING = re.compile(r"'(?:[^'\\]|\\.)*'")
# Regex literals stand after =~ / !~ (tag values) or open a call (field selectors);
# any other slash is a division.
_REGEX = re.compile(r"((?:[=!]~|\()\s*)/(?:[^/\\]|\\.)*/")
_IDENT = re.compile(r'"([^"]+)"')


@dataclass
class Names:
    measurements: list[str]
    identifiers: list[str]  # every quoted name that is not an alias
    field_regexes: list[str]  # /re/ used as a field selector inside a function call
    show_keys: list[str]  # SHOW TAG VALUES ... WITH KEY = "x"


def names_in(text: str) -> Names:
    """The measurements, tag or field names and field regexes an InfluxQL query names."""
    no_strings = _STRING.sub("''", text)
    field_regexes = [m[1:-1] for m in re.findall(r"\(\s*(/(?:[^/\\]|\\.)*/)", no_strings)]
    no_regex = _REGEX.sub(r"\1//", no_strings)
    measurements = re.findall(r'\bFROM\s+"([^"]+)"', no_regex, re.I)
    # FROM /regex/ (a SHOW over several measurements): the names it matches.
    for rx in re.findall(r"\bFROM\s+/((?:[^/\\]|\\.)*)/", no_strings, re.I):
        measurements += [m for m in SERIES if re.search(rx, m)] or [f"/{rx}/"]
    show_keys = re.findall(r'\bWITH\s+KEY\s*=\s*"([^"]+)"', no_regex, re.I)
    without_aliases = re.sub(r'\bAS\s+"[^"]+"', "", no_regex, flags=re.I)
    without_from = re.sub(r'\bFROM\s+"[^"]+"', "", without_aliases, flags=re.I)
    without_keys = re.sub(r'\bWITH\s+KEY\s*=\s*"[^"]+"', "", without_from, flags=re.I)
    return Names(measurements, _IDENT.findall(without_keys), field_regexes, show_keys)


def unknown_names(text: str) -> list[str]:
    """Names that no measurement the project writes has: empty when the query is sound."""
    names = names_in(text)
    problems = [f"measurement {m!r}" for m in names.measurements if m not in SERIES]
    series = [SERIES[m] for m in names.measurements if m in SERIES]
    if not names.measurements:  # SHOW TAG VALUES across every measurement
        series = list(SERIES.values())
    tags = set(RUN_TAGS).union(*(s.tags for s in series))
    for ident in names.identifiers:
        if ident not in tags and not any(s.has_field(ident) for s in series):
            problems.append(f"tag or field {ident!r}")
    for key in names.show_keys:
        if key not in tags:
            problems.append(f"tag key {key!r}")
    for rx in names.field_regexes:
        matched = [f for s in series for f in s.fields if re.search(rx, f)]
        samples = [f for s in series for f in _pattern_samples(s.field_patterns)]
        if matched or not any(re.search(rx, f) for f in samples):
            problems.append(f"field regex /{rx}/")
    return problems


def _pattern_samples(patterns: Sequence[str]) -> list[str]:
    """One name per field family (`rcode_[a-z0-9_]+` -> `rcode_noerror`)."""
    return [re.sub(r"\[[^\]]*\]\+", "noerror", p) for p in patterns]


def provisioned_datasource_uids() -> set[str]:
    uids = set()
    for path in DATASOURCES.glob("*.yaml"):
        for ds in yaml.safe_load(path.read_text()).get("datasources", []):
            uids.add(ds["uid"])
    return uids
