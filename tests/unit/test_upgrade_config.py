"""The upgrade plan model: what loads, and every bad plan refused with its YAML path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from soak.errors import InputError
from soak.upgrade.config import load_plan
from soak.upgrade.config.checks import ApiCheck, UnchangedCheck

REPO = Path(__file__).resolve().parents[2]

TARGET = {
    "runtime": "process",
    "argv": ["true"],
    "ports": {"dns": {}, "api": {}},
}


def write_plan(tmp_path: Path, **overrides: object) -> Path:
    plan: dict[str, object] = {
        "name": "p",
        "old": TARGET,
        "new": TARGET,
        "snapshot": [{"kind": "dig", "name": "www", "qname": "www.example.test"}],
        "checks": [
            {"name": "ready", "kind": "ready_within", "within_s": "10s"},
            {"name": "same", "kind": "unchanged", "snapshot": "www", "needs": "ready"},
        ],
    }
    plan.update(overrides)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def test_minimal_plan_loads(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path), env={})
    assert plan.name == "p"
    assert plan.checks[0].kind == "ready_within"
    assert isinstance(plan.checks[1], UnchangedCheck)
    assert plan.checks[1].needs == ["ready"]  # a single name becomes a list
    assert plan.base_dir == tmp_path.resolve()


def test_unknown_check_kind_names_its_path(tmp_path: Path) -> None:
    path = write_plan(tmp_path, checks=[{"name": "x", "kind": "telepathy"}])
    with pytest.raises(InputError, match=r"checks\.0"):
        load_plan(path, env={})


def test_needs_naming_no_check(tmp_path: Path) -> None:
    path = write_plan(
        tmp_path, checks=[{"name": "a", "kind": "log", "pattern": "x", "needs": ["nope"]}]
    )
    with pytest.raises(InputError, match=r"checks\.0\.needs: 'nope' names no check"):
        load_plan(path, env={})


def test_needs_must_come_before(tmp_path: Path) -> None:
    checks = [
        {"name": "a", "kind": "log", "pattern": "x", "needs": "b"},
        {"name": "b", "kind": "log", "pattern": "y"},
    ]
    with pytest.raises(InputError, match="does not come before"):
        load_plan(write_plan(tmp_path, checks=checks), env={})


def test_missing_checklist_file(tmp_path: Path) -> None:
    path = write_plan(tmp_path, checks=[{"include": "checks/missing.yaml"}])
    with pytest.raises(InputError, match=r"checklist file .*missing\.yaml not found"):
        load_plan(path, env={})


def test_included_checklist_errors_name_that_file(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text(yaml.safe_dump([{"name": "x", "kind": "bogus"}]))
    path = write_plan(tmp_path, checks=[{"include": "list.yaml"}])
    with pytest.raises(InputError, match=r"list\.yaml: checks\.0"):
        load_plan(path, env={})


def test_included_checklist_expands_in_order(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text(
        yaml.safe_dump({"checks": [{"name": "inc", "kind": "log", "pattern": "E"}]})
    )
    checks = [
        {"name": "first", "kind": "ready_within", "within_s": 5},
        {"include": "list.yaml"},
        {"name": "last", "kind": "log", "pattern": "F", "needs": "inc"},
    ]
    plan = load_plan(write_plan(tmp_path, checks=checks), env={})
    assert [c.name for c in plan.checks] == ["first", "inc", "last"]


def test_unchanged_needs_a_snapshot_item(tmp_path: Path) -> None:
    checks = [{"name": "s", "kind": "unchanged", "snapshot": "zones"}]
    with pytest.raises(InputError, match="'zones' names no snapshot item"):
        load_plan(write_plan(tmp_path, checks=checks), env={})


def test_duplicate_check_names(tmp_path: Path) -> None:
    checks = [{"name": "a", "kind": "log", "pattern": "x"}] * 2
    with pytest.raises(InputError, match="duplicate check name 'a'"):
        load_plan(write_plan(tmp_path, checks=checks), env={})


def test_template_names_must_resolve(tmp_path: Path) -> None:
    checks = [{"name": "a", "kind": "api", "path": "/x", "headers": {"K": "{{token}}"}}]
    with pytest.raises(InputError, match=r"\{\{token\}\}: not a var"):
        load_plan(write_plan(tmp_path, checks=checks), env={})
    # a saved value, a var or the environment makes it known
    populate = [{"kind": "api", "path": "/login", "save": {"token": "$.token"}}]
    assert load_plan(write_plan(tmp_path, checks=checks, populate=populate), env={})
    assert load_plan(write_plan(tmp_path, checks=checks), env={"token": "t"})
    env_checks = [{"name": "a", "kind": "api", "path": "/x", "headers": {"K": "{{env.TOK}}"}}]
    with pytest.raises(InputError, match="environment variable TOK is not set"):
        load_plan(write_plan(tmp_path, checks=env_checks), env={})


def test_bad_regex_and_json_path(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a regular expression"):
        load_plan(write_plan(tmp_path, checks=[{"name": "l", "kind": "log", "pattern": "("}]))
    bad_path = [{"name": "a", "kind": "api", "path": "/", "expect": [{"path": "x", "count": 1}]}]
    with pytest.raises(InputError, match="starts with"):
        load_plan(write_plan(tmp_path, checks=bad_path), env={})


def test_json_expect_needs_exactly_one_assertion(tmp_path: Path) -> None:
    expect = [{"path": "$.a", "equals": 1, "count": 1}]
    checks = [{"name": "a", "kind": "api", "path": "/", "expect": expect}]
    with pytest.raises(InputError, match="exactly one of"):
        load_plan(write_plan(tmp_path, checks=checks), env={})


def test_missing_archive_and_volume_without_docker(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"data\.archive: .*old\.tar\.gz not found"):
        load_plan(write_plan(tmp_path, data={"archive": "old.tar.gz"}), env={})
    with pytest.raises(InputError, match="named volume needs docker"):
        load_plan(write_plan(tmp_path, data={"volume": "v"}), env={})


def test_migrate_takes_one_form(tmp_path: Path) -> None:
    migrate = {"command": ["true"], "container": {"image": "i", "command": ["x"], "mount": "/d"}}
    with pytest.raises(InputError, match="either `command` or `container`"):
        load_plan(write_plan(tmp_path, migrate=migrate), env={})


def test_set_overrides_drop_the_migration(tmp_path: Path) -> None:
    path = write_plan(tmp_path, migrate={"command": ["true"]})
    assert load_plan(path, env={}).migrate is not None
    assert load_plan(path, ["migrate=null"], env={}).migrate is None
    with pytest.raises(InputError, match="--set takes"):
        load_plan(path, ["migrate"], env={})


def test_the_shipped_pdns_plans_load(tmp_path: Path) -> None:
    archive = tmp_path / "old.tar.gz"
    script = REPO / "scripts" / "make-pdns-4.3.1-archive.py"
    if not Path("/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql").exists():
        pytest.skip("pdns-backend-sqlite3 schema files are not installed")
    subprocess.run([sys.executable, str(script), str(archive)], check=True, capture_output=True)
    plan = load_plan(
        REPO / "scenarios" / "pdns-auth-upgrade.yaml", [f"data.archive={archive}"], env={}
    )
    assert plan.migrate is not None and plan.migrate.command is not None
    names = [c.name for c in plan.checks]
    assert "one zone GET" in names and "no error lines in the log" in names
    post = next(c for c in plan.checks if c.name == "new zone POSTed")
    assert isinstance(post, ApiCheck) and post.method == "POST" and post.status == 201
    docker = load_plan(
        REPO / "scenarios" / "pdns-auth-upgrade-docker.yaml", [f"data.archive={archive}"], env={}
    )
    assert docker.migrate is not None and docker.migrate.container is not None
    assert docker.data.owner == "pdns:pdns"
    assert [c.name for c in docker.checks][:-1] == names  # the same checklist, plus one


def test_docker_versions_need_a_volume(tmp_path: Path) -> None:
    docker = {"runtime": "docker", "image": "x:1", "ports": {"dns": {"container": 53}}}
    with pytest.raises(InputError, match=r"old\.volume: a docker version needs"):
        load_plan(write_plan(tmp_path, old=docker, new={**docker, "volume": {"mount": "/d"}}))
    # An old process and a new image (or the other way round) share a host directory;
    # a named volume cannot be shared with a process.
    mixed = load_plan(write_plan(tmp_path, new={**docker, "volume": {"mount": "/d"}}), env={})
    assert mixed.data_on_host and mixed.uses_docker
    with pytest.raises(InputError, match=r"data\.volume: a named volume needs docker versions"):
        path = write_plan(tmp_path, new={**docker, "volume": {"mount": "/d"}}, data={"volume": "v"})
        load_plan(path, env={})


LOAD = {"rate_qps": 500, "mix": [{"name": "www", "queries": ["www.example.test A"]}]}


def test_a_swap_check_needs_a_load(tmp_path: Path) -> None:
    path = write_plan(tmp_path, checks=[{"name": "s", "kind": "swap", "max_lost": 0}])
    with pytest.raises(InputError, match=r"checks\.0: a swap check needs the plan's `load:`"):
        load_plan(path, env={})
    plan = load_plan(
        write_plan(tmp_path, load=LOAD, checks=[{"name": "s", "kind": "swap", "max_gap_s": "2s"}]),
        env={},
    )
    assert plan.load is not None and plan.load.rate_qps == 500 and plan.load.settle_s == 2.0


def test_a_swap_check_needs_a_bound_and_the_load_a_known_port(tmp_path: Path) -> None:
    path = write_plan(tmp_path, load=LOAD, checks=[{"name": "s", "kind": "swap"}])
    with pytest.raises(InputError, match="give max_lost, max_gap_s or both"):
        load_plan(path, env={})
    path = write_plan(tmp_path, load={**LOAD, "port": "nope"})
    with pytest.raises(InputError, match=r"load\.port: old has no port named 'nope'"):
        load_plan(path, env={})


def test_corpus_items_and_checks_refer_to_each_other(tmp_path: Path) -> None:
    (tmp_path / "names.queries").write_text("www.example.test A\n")
    corpus = {"kind": "corpus", "name": "c", "file": "names.queries", "count": 10}
    good = write_plan(
        tmp_path,
        snapshot=[corpus],
        checks=[{"name": "c", "kind": "corpus", "snapshot": "c", "ignore": ["ttl"]}],
    )
    plan = load_plan(good, env={})
    assert plan.checks[0].kind == "corpus"
    bad = write_plan(
        tmp_path,
        snapshot=[corpus, {"kind": "dig", "name": "www", "qname": "www.example.test"}],
        checks=[
            {"name": "a", "kind": "corpus", "snapshot": "www"},
            {"name": "b", "kind": "unchanged", "snapshot": "c"},
        ],
    )
    with pytest.raises(InputError) as info:
        load_plan(bad, env={})
    assert "checks.0.snapshot: 'www' names no corpus item" in str(info.value)
    assert "checks.1.snapshot: 'c' is a corpus: `kind: corpus`" in str(info.value)
    missing = write_plan(
        tmp_path,
        snapshot=[{**corpus, "file": "nope.queries"}],
        checks=[{"name": "ready", "kind": "ready_within", "within_s": 1}],
    )
    with pytest.raises(InputError, match=r"snapshot\.0\.file: .*nope\.queries not found"):
        load_plan(missing, env={})


def test_rollback_checks_are_their_own_checklist(tmp_path: Path) -> None:
    (tmp_path / "back.yaml").write_text(
        yaml.safe_dump({"checks": [{"name": "ready", "kind": "ready_within", "within_s": 5}]})
    )
    # The same check name as the upgrade's: a separate checklist, so allowed.
    plan = load_plan(write_plan(tmp_path, rollback={"checks": [{"include": "back.yaml"}]}), env={})
    assert plan.rollback is not None and plan.rollback.checks[0].name == "ready"
    bad = write_plan(
        tmp_path,
        load=LOAD,
        rollback={
            "checks": [
                {"name": "a", "kind": "log", "pattern": "x", "needs": "same"},
                {"name": "s", "kind": "swap", "max_lost": 0},
            ]
        },
    )
    with pytest.raises(InputError) as info:
        load_plan(bad, env={})
    assert "rollback.checks.0.needs: 'same' names no check" in str(info.value)
    assert "rollback.checks.1: no load runs through a rollback" in str(info.value)


def test_a_matrix_entry_sets_plan_values_and_names_the_pair(tmp_path: Path) -> None:
    from soak.upgrade.config import load_matrix

    matrix = {"old": {"1.0": {"old.version": "1.0"}, "2.0": {"old.version": "2.0", "vars.x": "y"}}}
    path = write_plan(tmp_path, new=dict(TARGET), matrix=matrix, vars={"x": "default"})
    plans = load_matrix(path, env={})
    assert [(p.name, p.old.version) for p in plans] == [
        ("p[old 1.0]", "1.0"),
        ("p[old 2.0]", "2.0"),
    ]
    assert plans[1].vars["x"] == "y" and plans[0].vars["x"] == "default"
    # --old picks entries in the order given; --set still wins over an entry.
    picked = load_matrix(path, ["old.version='9'"], olds=["2.0"], env={})
    assert [(p.name, p.old.version) for p in picked] == [("p[old 2.0]", "9")]
    with pytest.raises(InputError, match=r"--old 3\.0: no such matrix entry .*entries: 1\.0, 2\.0"):
        load_matrix(path, olds=["3.0"], env={})
    with pytest.raises(InputError, match="has no `matrix:`"):
        load_matrix(write_plan(tmp_path), olds=["1.0"], env={})


def test_a_bad_matrix_entry_is_refused_at_load(tmp_path: Path) -> None:
    bad = {"old.runtime": "external"}  # no argv there
    path = write_plan(tmp_path, new=dict(TARGET), matrix={"old": {"bad": bad}})
    with pytest.raises(InputError, match=r"\(matrix entry bad\): old\.external\.argv"):
        load_plan(path, env={})
