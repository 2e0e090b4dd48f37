"""The Grafana dashboards and alert rules: well formed, resolvable, and naming only
measurements, tags and fields the project writes (docs/architecture.md "Time series")."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from soak.analysis.machine import SATURATED_BUSY_RATIO
from soak.names import SERIES
from tests.support import grafana as g

DASHBOARD_IDS = [p.name for p in g.DASHBOARDS]


def test_both_dashboards_exist() -> None:
    assert {"soak.json", "upgrade.json"} <= set(DASHBOARD_IDS)


@pytest.mark.parametrize("path", g.DASHBOARDS, ids=DASHBOARD_IDS)
def test_panel_ids_are_unique(path: Path) -> None:
    ids = [p["id"] for p in g.all_panels(g.load_dashboard(path))]
    assert len(ids) == len(set(ids)), sorted(ids)


def _overlap(a: dict[str, int], b: dict[str, int]) -> bool:
    return (
        a["x"] < b["x"] + b["w"]
        and b["x"] < a["x"] + a["w"]
        and a["y"] < b["y"] + b["h"]
        and b["y"] < a["y"] + a["h"]
    )


@pytest.mark.parametrize("path", g.DASHBOARDS, ids=DASHBOARD_IDS)
def test_grid_positions_fit_and_do_not_overlap(path: Path) -> None:
    panels = list(g.all_panels(g.load_dashboard(path)))
    for p in panels:
        pos = p["gridPos"]
        assert pos["x"] >= 0 and pos["y"] >= 0 and pos["w"] > 0 and pos["h"] > 0, p["title"]
        assert pos["x"] + pos["w"] <= 24, p["title"]
    for a, b in itertools.combinations(panels, 2):
        assert not _overlap(a["gridPos"], b["gridPos"]), (a["title"], b["title"])


def test_overlap_check_sees_an_overlap() -> None:
    a = {"x": 0, "y": 0, "w": 12, "h": 8}
    assert _overlap(a, {"x": 11, "y": 7, "w": 12, "h": 8})
    assert not _overlap(a, {"x": 12, "y": 0, "w": 12, "h": 8})
    assert not _overlap(a, {"x": 0, "y": 8, "w": 24, "h": 1})


def _datasource_refs(node: Any) -> list[Any]:
    """Every `datasource` value anywhere in a dashboard (panels, targets, variables...)."""
    refs = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                refs.append(value)
            refs += _datasource_refs(value)
    elif isinstance(node, list):
        for item in node:
            refs += _datasource_refs(item)
    return refs


@pytest.mark.parametrize("path", g.DASHBOARDS, ids=DASHBOARD_IDS)
def test_every_datasource_reference_is_provisioned(path: Path) -> None:
    uids = g.provisioned_datasource_uids()
    refs = _datasource_refs(g.load_dashboard(path))
    assert refs
    for ref in refs:
        # A bare string is a datasource *name* in old dashboards: not used here.
        assert isinstance(ref, dict), ref
        assert ref["uid"] in uids | {g.EXPR_UID}, ref
        assert ref["type"] == ("__expr__" if ref["uid"] == g.EXPR_UID else "influxdb"), ref


def test_provisioned_datasource_is_influxql() -> None:
    (path,) = g.DATASOURCES.glob("*.yaml")
    (ds,) = yaml.safe_load(path.read_text())["datasources"]
    assert ds["type"] == "influxdb"
    assert ds["jsonData"].get("version", "InfluxQL") == "InfluxQL"
    assert ds["jsonData"]["dbName"]


def test_alert_rules_reference_provisioned_datasources_and_expressions() -> None:
    uids = g.provisioned_datasource_uids()
    rules = g.load_alert_rules()
    assert rules["apiVersion"] == 1
    titles = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            titles.append(rule["title"])
            refs = {d["refId"]: d for d in rule["data"]}
            assert rule["condition"] in refs
            for d in rule["data"]:
                assert d["datasourceUid"] in uids | {g.EXPR_UID}
                assert d["model"]["refId"] == d["refId"]
                if d["datasourceUid"] == g.EXPR_UID:
                    assert d["model"]["type"] in ("reduce", "threshold", "math")
                    assert d["model"]["expression"].lstrip("$") in refs
                else:
                    assert d["model"]["rawQuery"] is True
                    assert "relativeTimeRange" in d
    uids_of_rules = [r["uid"] for grp in rules["groups"] for r in grp["rules"]]
    assert len(uids_of_rules) == len(set(uids_of_rules))
    assert len(titles) == 4


def test_dashboard_provider_path_is_where_compose_mounts_the_dashboards() -> None:
    (path,) = (g.GRAFANA / "provisioning" / "dashboards").glob("*.yaml")
    (provider,) = yaml.safe_load(path.read_text())["providers"]
    compose = yaml.safe_load((g.ROOT / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./grafana/dashboards:{provider['options']['path']}:ro" in mounts


@pytest.mark.parametrize("query", g.every_query(), ids=lambda q: q.where)
def test_query_names_only_written_series(query: g.Query) -> None:
    assert g.unknown_names(query.text) == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('SELECT mean("rss") FROM "process" WHERE $timeFilter', "tag or field 'rss'"),
        ('SELECT mean("fds") FROM "procs"', "measurement 'procs'"),
        ('SELECT sum(/^lat_/) FROM "load"', "field regex /^lat_/"),
        ('SELECT sum(/^rcodes_/) FROM "load"', "field regex /^rcodes_/"),
        ('SELECT last("ok") FROM "api" GROUP BY "probe"', "tag or field 'probe'"),
        ('SHOW TAG VALUES FROM "leak" WITH KEY = "run"', "tag key 'run'"),
    ],
)
def test_name_check_catches_unknown_names(text: str, problem: str) -> None:
    assert problem in g.unknown_names(text)


def test_name_check_accepts_aliases_regex_values_and_divisions() -> None:
    text = (
        'SELECT sum("lost") / sum("sent") AS "lost ratio", sum(/^rcode_/) FROM "load" '
        'WHERE "soak" =~ /^(a\\/b|c)$/ AND "class" = \'all\' GROUP BY "class"'
    )
    assert g.unknown_names(text) == []


def test_every_panel_uses_the_run_variables() -> None:
    d = g.load_dashboard(g.GRAFANA / "dashboards" / "soak.json")
    for q in g.dashboard_queries(g.GRAFANA / "dashboards" / "soak.json"):
        if q.kind == "panel":
            assert {"soak", "target", "version"} <= g.variables_used(q.text), q.where
            assert "$timeFilter" in q.text, q.where
    names = [v["name"] for v in d["templating"]["list"]]
    # the team first: the run drop-down offers the chosen teams' runs
    assert names == ["team", "soak", "target", "version"]
    (soak,) = [v for v in d["templating"]["list"] if v["name"] == "soak"]
    assert "team" in g.variables_used(soak["query"])


def test_expand_renders_like_grafana() -> None:
    text = 'SELECT mean("fds") FROM "process" WHERE "version" =~ /^($version)$/ AND $timeFilter'
    text += " GROUP BY time($__interval)"
    out = g.expand(text, {"version": ["4.7.1", "4.8"]}, g.time_filter(), "30s")
    assert out == (
        'SELECT mean("fds") FROM "process" WHERE "version" =~ /^(4\\.7\\.1|4\\.8)$/ '
        "AND time >= now() - 6h GROUP BY time(30s)"
    )
    assert g.time_filter(1_500_000_000, 2_000_000_001) == "time >= 1500ms and time <= 2001ms"


ARCHITECTURE = g.ROOT / "docs" / "architecture.md"


def _series_section() -> list[str]:
    """The lines of docs/architecture.md's "Time series" section (its other tables are
    not about names)."""
    lines = ARCHITECTURE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip("#").strip() == "Time series")
    level = len(lines[start]) - len(lines[start].lstrip("#"))
    end = next(
        (
            i
            for i in range(start + 1, len(lines))
            if lines[i].startswith("#") and len(lines[i]) - len(lines[i].lstrip("#")) <= level
        ),
        len(lines),
    )
    return lines[start + 1 : end]


def _design_table() -> dict[str, tuple[list[str], list[str]]]:
    """measurement -> (extra tags, fields) from docs/architecture.md's "Time series" table."""
    rows = {}
    for line in _series_section():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        # Parentheses hold examples and values (`GET /stats/summary`, `ok`...), not names.
        tags, fields = (re.findall(r"`([^`]+)`", re.sub(r"\([^)]*\)", "", c)) for c in cells[1:])
        rows[cells[0].strip("`")] = (tags, fields)
    return rows


def test_names_module_matches_the_design_table() -> None:
    table = _design_table()
    assert set(table) == set(SERIES)
    for measurement, (tags, fields) in table.items():
        series = SERIES[measurement]
        assert set(tags) <= set(series.tags), measurement
        fixed = [f for f in fields if "<" not in f]
        assert set(fixed) == set(series.fields), measurement
        for family in (f for f in fields if "<" in f):
            assert series.has_field(family.replace("<name>", "noerror")), (measurement, family)


@pytest.mark.parametrize("path", g.DASHBOARDS, ids=DASHBOARD_IDS)
def test_panel_targets_and_expressions_resolve(path: Path) -> None:
    for panel in g.all_panels(g.load_dashboard(path)):
        targets = panel.get("targets", [])
        refs = [t["refId"] for t in targets]
        assert len(refs) == len(set(refs)), panel["title"]
        for t in targets:
            if t["datasource"]["uid"] == g.EXPR_UID:
                used = set(re.findall(r"\$([A-Z])\b", t["expression"]))
                assert used and used <= set(refs) - {t["refId"]}, panel["title"]


@pytest.mark.parametrize("path", g.DASHBOARDS, ids=DASHBOARD_IDS)
def test_alias_tags_are_grouped_by(path: Path) -> None:
    """`$tag_x` in a legend only works when the query groups by x."""
    for panel in g.all_panels(g.load_dashboard(path)):
        for t in panel.get("targets", []):
            aliased = set(re.findall(r"\$tag_(\w+)", t.get("alias", "")))
            group_by = t.get("query", "").partition("GROUP BY")[2]
            grouped = set(re.findall(r'"(\w+)"', group_by))
            assert aliased <= grouped, (panel["title"], t["refId"])


@pytest.mark.parametrize("path", g.DASHBOARDS, ids=DASHBOARD_IDS)
def test_annotations_name_columns_their_query_selects(path: Path) -> None:
    for a in g.load_dashboard(path)["annotations"]["list"]:
        selected = g.names_in(a["query"]).identifiers
        assert a["textColumn"] in selected and a["tagsColumn"] in selected, a["name"]


@pytest.mark.parametrize("path", g.DASHBOARDS, ids=DASHBOARD_IDS)
def test_load_queries_read_the_total_or_each_agent_never_both(path: Path) -> None:
    """Load agents' parts are `load` series with an `agent` tag beside the run's total: a
    query of `load` either keeps to the total (`"agent" = ''`) or shows each agent."""
    for panel in g.all_panels(g.load_dashboard(path)):
        for t in panel.get("targets", []):
            query = t.get("query", "")
            if 'FROM "load"' not in query:
                continue
            total = "\"agent\" = ''" in query
            per_agent = "\"agent\" != ''" in query and '"agent"' in query.partition("GROUP BY")[2]
            assert total != per_agent, (panel["title"], query)


def test_alert_rules_on_load_read_the_total() -> None:
    load_rules = [q for q in g.alert_queries() if 'FROM "load"' in q.text]
    assert load_rules
    for q in load_rules:
        assert "\"agent\" = ''" in q.text, q.where


def test_the_machines_load_sits_under_the_latency_panel() -> None:
    """A reader tells a slow server from a busy machine at a glance: the `host` panel
    shares the latency panel's column and starts where it ends, on the saturation line
    the report marks (criteria.SATURATED_BUSY_RATIO)."""
    panels = list(g.all_panels(g.load_dashboard(g.GRAFANA / "dashboards" / "soak.json")))

    def reading(measurement: str, field: str) -> dict[str, Any]:
        (found,) = [
            p
            for p in panels
            if any(
                f'FROM "{measurement}"' in t.get("query", "") and f'"{field}"' in t["query"]
                for t in p.get("targets", [])
            )
        ]
        return found

    latency, machine = reading("load", "lat_p99_ms"), reading("host", "cpu_busy_ratio")
    lat, host = latency["gridPos"], machine["gridPos"]
    assert (host["x"], host["w"]) == (lat["x"], lat["w"])
    assert host["y"] == lat["y"] + lat["h"]
    steps = machine["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps if s["value"] is not None] == [SATURATED_BUSY_RATIO]
