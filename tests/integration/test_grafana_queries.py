"""Every InfluxQL query of the Grafana dashboards and alert rules, run against a real
InfluxDB 1.6 after a short real soak wrote into it.

The soak is the real command (`soak start --foreground`) with 1-s ticks: a real
pdns-server under load, every sampler (proc, prom, http API, dig, files, load), leak
verdicts, and an influx_v1 sink. During the warm-up the test kills the server once
(the service restarts it: `exited` and `restarted` events), and a second influx_v1 sink
points at a port where nothing listens (it spools: a `sink_down` event). Then each
query, with `$timeFilter`, `$__interval` and the template variables expanded as
Grafana expands them, must return at least one series with a value. The upgrade
dashboard's `upgrade_check` points come from a real `soak upgrade` of the pdns plan
into the same InfluxDB.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from soak.clock import NS_PER_S
from soak.names import SERIES
from tests.support import grafana as g
from tests.support.grafana_soak import DB, Soaked, soaked_influx
from tests.support.tsdb import InfluxV1

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        any(shutil.which(b) is None for b in ("influxd", "pdns_server", "sqlite3")),
        reason="influxd, pdns_server or sqlite3 is not installed",
    ),
]


@pytest.fixture(scope="module")
def soaked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Soaked]:
    with soaked_influx(tmp_path_factory.mktemp("grafana-queries")) as soaked:
        yield soaked


def _values(influx: InfluxV1, text: str) -> list[str]:
    """A template variable's values, as Grafana gets them (the second column)."""
    return sorted({str(row[1]) for s in influx.query(text, DB) for row in s["values"]})


def _variables(soaked: Soaked, dashboard: Path) -> dict[str, list[str]]:
    """Resolves the variables in order, each with the ones before it: the run (a single
    value) is this test's soak, picked from the list; the others are Grafana's All."""
    resolved: dict[str, list[str]] = {}
    for v in g.load_dashboard(dashboard)["templating"]["list"]:
        text = g.expand(v["query"], resolved, g.time_filter())
        values = _values(soaked.influx, text)
        assert values, f"variable {v['name']}: {text}"
        if v["multi"] or v["includeAll"]:
            resolved[v["name"]] = values
        else:
            assert v["name"] == "soak" and soaked.run_id in values, (v["name"], values)
            resolved[v["name"]] = [soaked.run_id]
    return resolved


def _has_value(series: list[dict[str, Any]]) -> bool:
    return any(v is not None for s in series for row in s["values"] for v in row[1:])


def _time_filters(soaked: Soaked, query: g.Query) -> list[str]:
    if query.kind == "alert":
        rule = query.where.split()[1]
        (data,) = [
            d
            for grp in g.load_alert_rules()["groups"]
            for r in grp["rules"]
            if r["uid"] == rule
            for d in r["data"]
            if d["datasourceUid"] != g.EXPR_UID
        ]
        return [g.time_filter(relative=f"{data['relativeTimeRange']['from']}s")]
    margin_ns = 60 * NS_PER_S
    return [
        g.time_filter(relative="6h"),
        g.time_filter(soaked.start_ns - margin_ns, soaked.end_ns + margin_ns),
    ]


def _dashboard_of(query: g.Query) -> Path | None:
    name = query.where.split()[0]
    return g.GRAFANA / "dashboards" / name if name.endswith(".json") else None


@pytest.mark.parametrize("query", g.every_query(), ids=lambda q: q.where)
def test_query_returns_a_series(soaked: Soaked, query: g.Query) -> None:
    assert g.unknown_names(query.text) == []
    dashboard = _dashboard_of(query)
    variables = _variables(soaked, dashboard) if dashboard is not None else {}
    for timefilter in _time_filters(soaked, query):
        text = g.expand(query.text, variables, timefilter, interval="10s")
        assert g.variables_used(text) == set(), text
        series = soaked.influx.query(text, DB)
        assert series, f"{query.where}: no series for\n{text}\n{soaked.output[-3000:]}"
        assert _has_value(series), f"{query.where}: only nulls for\n{text}"


def test_a_query_on_an_unwritten_field_returns_nothing(soaked: Soaked) -> None:
    """The check above can fail: a well-formed query on a name nobody writes is empty."""
    variables = _variables(soaked, g.GRAFANA / "dashboards" / "soak.json")
    text = 'SELECT mean("rss_bytez") FROM "process" WHERE "soak" =~ /^($soak)$/ AND $timeFilter'
    assert soaked.influx.query(g.expand(text, variables, g.time_filter()), DB) == []


def soaked_vars() -> list[dict[str, Any]]:
    return list(g.load_dashboard(g.GRAFANA / "dashboards" / "soak.json")["templating"]["list"])


def test_run_picker_lists_soak_runs_not_upgrade_runs(soaked: Soaked) -> None:
    """The runs of the time range only: not upgrade runs, not a run of three days ago
    (which SHOW TAG VALUES, the list of every run ever written, still names)."""
    old_ns = soaked.start_ns - 3 * 86_400 * NS_PER_S
    body = f"process,soak=old-run,scenario=s,target=t,version=v fds=1 {old_ns}\n"
    httpx.post(soaked.influx.url + "/write", params={"db": DB}, content=body).raise_for_status()
    every = _values(soaked.influx, 'SHOW TAG VALUES FROM "process" WITH KEY = "soak"')
    assert "old-run" in every
    (var,) = [
        v
        for v in g.load_dashboard(g.GRAFANA / "dashboards" / "soak.json")["templating"]["list"]
        if v["name"] == "soak"
    ]
    teams = {"team": ["dns"]}
    picked = _values(soaked.influx, g.expand(var["query"], teams, g.time_filter()))
    assert picked == [soaked.run_id]
    # Another team's runs are not offered; Grafana's All (the variable's allValue `.*`,
    # not escaped) offers every team's and runs of no team.
    tf = g.time_filter()
    assert _values(soaked.influx, g.expand(var["query"], {"team": ["web"]}, tf)) == []
    (team_var,) = [v for v in soaked_vars() if v["name"] == "team"]
    body = f"process,soak=no-team,scenario=s,target=t,version=v fds=1 {soaked.start_ns}\n"
    httpx.post(soaked.influx.url + "/write", params={"db": DB}, content=body).raise_for_status()
    every_team = var["query"].replace("$team", team_var["allValue"])
    offered = _values(soaked.influx, g.expand(every_team, {}, tf))
    assert offered == sorted(["no-team", soaked.run_id])
    upgrade_runs = _values(soaked.influx, 'SHOW TAG VALUES FROM "upgrade_check" WITH KEY = "soak"')
    assert len(upgrade_runs) == 1 and upgrade_runs != [soaked.run_id]


def test_leak_alert_sees_the_growing_verdict_and_restart_alert_the_restart(
    soaked: Soaked,
) -> None:
    """The alert queries' numbers, as the reduce and threshold expressions see them."""
    by_uid = {q.where.split()[1]: q for q in g.alert_queries()}
    tf = g.time_filter(relative="900s")
    growing = soaked.influx.query(g.expand(by_uid["soak-leak-growing"].text, {}, tf), DB)
    last = soaked.influx.query(
        'SELECT * FROM "leak" GROUP BY "resource" ORDER BY time DESC LIMIT 1', DB
    )
    said = {s["tags"]["resource"]: s["values"][0][s["columns"].index("verdict")] for s in last}
    assert {s["tags"]["resource"] for s in growing} & {"rss_anon_bytes", "heap_inuse_bytes"}, said
    restarts = soaked.influx.query(g.expand(by_uid["soak-target-restarted"].text, {}, tf), DB)
    assert sum(row[1] for s in restarts for row in s["values"]) >= 1
    spooling = soaked.influx.query(g.expand(by_uid["soak-sink-spooling"].text, {}, tf), DB)
    assert spooling


def test_everything_written_is_in_the_names_table(soaked: Soaked) -> None:
    """The other direction: the soak and the upgrade wrote only names of soak.names
    (the table the dashboards are checked against), so that table is not stale."""
    (measurements,) = soaked.influx.query("SHOW MEASUREMENTS", DB)
    written = {row[0] for row in measurements["values"]}
    assert written == set(SERIES), written ^ set(SERIES)
    for m in sorted(written):
        fields = [row[0] for s in soaked.influx.query(f'SHOW FIELD KEYS FROM "{m}"', DB)
                  for row in s["values"]]  # fmt: skip
        assert [f for f in fields if not SERIES[m].has_field(f)] == [], m
        tags = [row[0] for s in soaked.influx.query(f'SHOW TAG KEYS FROM "{m}"', DB)
                for row in s["values"]]  # fmt: skip
        assert set(tags) - set(SERIES[m].all_tags) == set(), m


def test_annotations_return_the_text_and_tags_columns(soaked: Soaked) -> None:
    for path in g.DASHBOARDS:
        variables = _variables(soaked, path)
        for a in g.load_dashboard(path)["annotations"]["list"]:
            text = g.expand(a["query"], variables, g.time_filter())
            (series,) = soaked.influx.query(text, DB)
            assert {a["textColumn"], a["tagsColumn"]} <= set(series["columns"]), a["name"]
            kinds = {row[series["columns"].index("kind")] for row in series["values"]}
            assert "ready" in kinds, kinds


def test_alert_queries_return_numbers_for_the_reduce_expression(soaked: Soaked) -> None:
    for q in g.alert_queries():
        text = g.expand(q.text, {}, g.time_filter(relative="900s"))
        values = [v for s in soaked.influx.query(text, DB) for row in s["values"] for v in row[1:]]
        assert values and all(isinstance(v, int | float) for v in values), (q.where, values)


def test_cpu_per_query_expression_has_aligned_inputs(soaked: Soaked) -> None:
    """The panel's math expression ($A / $B * 1e6) joins A and B on time: the two
    hidden queries must share buckets, and the result be a plausible µs per query."""
    path = g.GRAFANA / "dashboards" / "soak.json"
    (panel,) = [p for p in g.all_panels(g.load_dashboard(path)) if p["title"] == "CPU per query"]
    variables = _variables(soaked, path)
    by_ref = {}
    for t in panel["targets"]:
        if t["datasource"]["uid"] != g.EXPR_UID:
            text = g.expand(t["query"], variables, g.time_filter(), interval="10s")
            (series,) = soaked.influx.query(text, DB)
            by_ref[t["refId"]] = {row[0]: row[1] for row in series["values"]}
    common = [ts for ts in by_ref["A"] if ts in by_ref["B"] and by_ref["B"][ts]]
    assert common
    us_per_query = sorted(by_ref["A"][ts] / by_ref["B"][ts] * 1e6 for ts in common)
    # A bucket can hold a tick whose CPU reading did not move (the kernel counts CPU in
    # 10-ms ticks; beside two hogs one bucket of four read 0 at 86-97 µs for the rest).
    assert all(math.isfinite(us) and us >= 0 for us in us_per_query), us_per_query
    # Not a speed figure (shared noisy cores): only the scale. A CPU seconds / q/s mix-up
    # would be off by 1e6.
    assert 1 < us_per_query[len(us_per_query) // 2] < 100_000, us_per_query


def test_phase_latency_panel_shows_the_reports_p99(soaked: Soaked) -> None:
    """The dashboard's per-phase latency (the `latency` points, as its query reads them
    from InfluxDB) is the report's Phases figure: the p99 of the phase's merged window
    histograms, to the digit; not a maximum or mean of the windows' p99s."""
    dashboard = g.GRAFANA / "dashboards" / "soak.json"
    (query,) = [q for q in g.dashboard_queries(dashboard) if "panel 28 " in q.where]
    text = g.expand(query.text, _variables(soaked, dashboard), g.time_filter())
    shown = {
        s["tags"]["phase"]: s["values"][0][s["columns"].index("p99 ms")]
        for s in soaked.influx.query(text, DB)
        if s["tags"]["class"] == "all"
    }
    (report_path,) = (soaked.home / "runs").glob(f"{soaked.run_id}/report.json")
    report = json.loads(report_path.read_text())
    expected = {
        row["name"]: row["metrics"]["lat_p99_ms"]["p99"]
        for row in report["phases"]
        if row["metrics"].get("lat_p99_ms")
    }
    assert expected and shown == expected, (shown, expected)
    # The windows' own p99s differ from it: the panel does not read them.
    windows = soaked.influx.query(
        f'SELECT max("lat_p99_ms"), mean("lat_p99_ms") FROM "load" WHERE "agent" = \'\''
        f" AND \"class\" = 'all' AND \"soak\" = '{soaked.run_id}'",
        DB,
    )
    worst, mean = windows[0]["values"][0][1:]
    assert max(expected.values()) != worst or min(expected.values()) != mean
