"""soak.placeholders: the one renderer, with what each of its three users needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soak.errors import InputError
from soak.placeholders import (
    Placeholders,
    check_text,
    fill,
    fill_services,
    literal_secrets,
    looks_secret,
    problems,
    render,
    render_known,
    reveal,
    reveal_json,
    secret_references,
    services_named,
)
from soak.targets.base import Running

VALUES = Placeholders(run_dir="/runs/r1", host="127.0.0.1", ports={"dns": 5300}, data_dir="/d")


def test_render_fills_known_placeholders_and_leaves_other_braces() -> None:
    text = 'listen {host}:{port.dns} dir={data_dir} run={run_dir} json={"a": {x}}'
    assert render(text, VALUES) == 'listen 127.0.0.1:5300 dir=/d run=/runs/r1 json={"a": {x}}'


def test_render_unknown_port_names_the_known_ones() -> None:
    with pytest.raises(InputError, match=r"unknown port \{port\.api\} \(named ports: dns\)"):
        render("{port.api}", VALUES, "argv")


def test_render_data_dir_unknown_is_an_error() -> None:
    values = Placeholders(run_dir="/r", host="::1")
    with pytest.raises(InputError, match="data_dir"):
        render("{data_dir}/x", values)


def test_port_names_may_hold_dots_dashes_and_underscores() -> None:
    values = Placeholders(run_dir="/r", host="h", ports={"dns.tls": 853, "web-ui": 80, "a_b": 1})
    assert render("{port.dns.tls} {port.web-ui} {port.a_b}", values) == "853 80 1"
    # the upgrade's map reads the same names (it once stopped at a dot)
    assert fill("{port.dns.tls}", {"port.dns.tls": "853"}) == "853"


def test_fill_from_a_map_leaves_unknown_and_other_braces() -> None:
    text = fill("{data_dir}/db {port.api} {json} {port.none} {run_dir}", {"data_dir": "/d"})
    assert text == "/d/db {port.api} {json} {port.none} {run_dir}"


def test_target_renderers_leave_service_placeholders() -> None:
    text = "{service.up.port.dns} {service.up.host} {port.dns}"
    assert render(text, VALUES) == "{service.up.port.dns} {service.up.host} 5300"
    assert render_known(text, VALUES) == "{service.up.port.dns} {service.up.host} 5300"
    assert fill(text, {"port.dns": "1", "host": "h"}) == "{service.up.port.dns} {service.up.host} 1"


def test_fill_services_fills_services_and_leaves_the_targets_own() -> None:
    up = Running("up", "127.0.0.2", {"dns": 5353, "dns.tls": 853}, 1, None)
    text = "{service.up.host}:{service.up.port.dns} {service.up.port.dns.tls} {port.dns} {host}"
    assert fill_services(text, {"up": up}, "t") == "127.0.0.2:5353 853 {port.dns} {host}"
    assert fill_services("{service.up.data_dir}", {"up": up}, "t") == "{service.up.data_dir}"
    with pytest.raises(InputError, match=r"t\.argv: unknown service 'x' \(services: up\)"):
        fill_services("{service.x.host}", {"up": up}, "t.argv")
    with pytest.raises(InputError, match="service 'up' has no port 'api'"):
        fill_services("{service.up.port.api}", {"up": up}, "t")


def test_services_named() -> None:
    text = "{service.a.host} {service.b-2.port.x} {port.dns} {service.a.c.host}"
    assert services_named(text) == {"a", "b-2"}
    assert services_named('{"json": {service}}') == set()


# ---------------------------------------------------------------- secrets, by reference


def test_secrets_are_revealed_only_where_used(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "token").write_text("from-a-file\n")
    monkeypatch.setenv("SOAK_UNIT_TOKEN", "from-the-env")
    text = "Bearer {env.SOAK_UNIT_TOKEN}; {file:token}; {port.dns}; {env}"
    assert reveal(text, tmp_path) == "Bearer from-the-env; from-a-file; {port.dns}; {env}"
    values = Placeholders(run_dir="/r", host="h", ports={"dns": 53}, base_dir=tmp_path)
    assert render(text, values) == "Bearer from-the-env; from-a-file; 53; {env}"
    # What is kept or shown holds the reference as written.
    assert render_known(text, values) == "Bearer {env.SOAK_UNIT_TOKEN}; {file:token}; 53; {env}"
    assert fill(text, {"port.dns": "53"}).startswith("Bearer {env.SOAK_UNIT_TOKEN}; {file:")
    assert fill_services(text, {}, "x") == text
    assert secret_references(text) == ["{env.SOAK_UNIT_TOKEN}", "{file:token}"]
    body = {"a": ["{env.SOAK_UNIT_TOKEN}", 1], "b": None}
    assert reveal_json(body, tmp_path, "body") == {"a": ["from-the-env", 1], "b": None}


def test_a_secret_that_cannot_be_read_is_bad_input(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("SOAK_UNIT_UNSET", raising=False)
    with pytest.raises(InputError, match=r"^h\.x: \{env\.SOAK_UNIT_UNSET\}: environment "):
        reveal("{env.SOAK_UNIT_UNSET}", tmp_path, "h.x")
    with pytest.raises(InputError, match=r"\{file:nope\}: cannot read .*/nope: No such file"):
        reveal("{file:nope}", tmp_path)


# ---------------------------------------------------------------- what is not a placeholder


@pytest.mark.parametrize(
    ("text", "meant"),
    [
        ("Bearer {env:TOKEN}", "{env.TOKEN}"),
        ("{file.secrets/api.token}", "{file:secrets/api.token}"),
        ("{rundir}/unbound.log", "{run_dir}"),
        ("{RUN_DIR}", "{run_dir}"),
        ("{data-dir}", "{data_dir}"),
        ("{port:dns}", "{port.dns}"),
        ("{prot.dns}", "{port.dns}"),
        ("{hots}", "{host}"),
        ("{service:up.host}", "{service.up.host}"),
    ],
)
def test_a_misspelt_placeholder_is_named_with_what_it_meant(text: str, meant: str) -> None:
    [problem] = problems(text)
    assert f"is not a placeholder: did you mean {meant}?" in problem
    with pytest.raises(InputError, match=r"^target\.argv\.1: \{"):
        check_text(text, "target.argv.1")


def test_a_name_in_braces_without_a_likely_meaning_lists_the_placeholders() -> None:
    [problem] = problems("x={token}")
    assert problem.startswith("{token} is not a placeholder: the placeholders are {data_dir},")
    assert "{{token}} writes it as is" in problem


def test_braces_around_what_is_not_a_name_are_text() -> None:
    """JSON, Lua tables, shell, brace expansion, PromQL labels, Go templates, regexes:
    none of them is read as a placeholder, so none is refused."""
    text = (
        '{"a": {"b": 1}} { kind = "dns" } ${HOME} {a,b} {stage="queue"} {{.State.Pid}}'
        " x{3} {} {port.dns} {env.X} {file:a.b} {service.up.port.dns} {{rundir}}"
    )
    assert problems(text) == []


def test_a_doubled_brace_writes_a_literal_one_where_the_text_is_used() -> None:
    text = "{{run_dir}} {run_dir} {{env.X}} {{port:dns}}"
    assert render(text, VALUES) == "{run_dir} /runs/r1 {env.X} {port:dns}"
    assert reveal(text) == "{run_dir} {run_dir} {env.X} {port:dns}"
    # The passes before the last keep the escape, so the last one does not fill it.
    up = Running("up", "127.0.0.2", {"dns": 5353}, 1, None)
    kept = fill_services("{{service.up.host}} {service.up.host}", {"up": up}, "t")
    assert kept == "{{service.up.host}} 127.0.0.2"
    assert render(kept, VALUES) == "{service.up.host} 127.0.0.2"
    assert fill("{{data_dir}}", {"data_dir": "/d"}) == "{{data_dir}}"
    assert secret_references("{{env.X}} {env.Y}") == ["{env.Y}"]


def test_an_upgrade_plans_own_syntax_is_filled_before_and_left_alone() -> None:
    """`{{name}}` of an upgrade plan is its own syntax (upgrade/template.py), filled first;
    what it leaves (a Go template, JSON) passes the single-brace renderer unchanged."""
    from soak.upgrade.template import Values

    values = Values({"api_key": "k1", "zones": "/api/v1/zones"}, {})
    filled = values.render(["{{api_key}}", "{{ zones }}/{port.api}", "{{.State.Pid}}", '{"a":{}}'])
    assert filled == ["k1", "/api/v1/zones/{port.api}", "{{.State.Pid}}", '{"a":{}}']
    assert [fill(t, {"port.api": "8081"}) for t in filled] == [
        "k1", "/api/v1/zones/8081", "{{.State.Pid}}", '{"a":{}}'
    ]  # fmt: skip


# ---------------------------------------------------------------- literal secrets


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("X-API-Key", True), ("REFDNS_TOKEN", True), ("api_key", True), ("apiKey", True),
        ("db_password", True), ("Authorization", True), ("--api-key", True), ("secret", True),
        ("dnskey", False), ("key_id", False), ("key-file", False), ("monkey", False),
        ("MALLOC_ARENA_MAX", False), ("control-key-file", False), ("tsig_keyname", False),
    ],
)  # fmt: skip
def test_a_secrets_name_is_told_by_its_last_word(name: str, secret: bool) -> None:
    assert looks_secret(name) is secret


def test_literal_secrets_names_where_and_the_reference_to_use() -> None:
    scenario = {
        "target": {
            "env": {"REFDNS_TOKEN": "abc123", "DNSKEY": "257 3 13 xyz", "T": "{env.T}"},
            "argv": ["srv", "--api-key=abc", "-token={file:t}", "--dnskey=abc"],
            "ready": {"probes": [{"headers": {"X-API-Key": "k"}}]},
        }
    }
    lines = literal_secrets(scenario)
    assert [line.split(":")[0] for line in lines] == [
        "target.env.REFDNS_TOKEN", "target.argv.1", "target.ready.probes.0.headers.X-API-Key"
    ]  # fmt: skip
    assert lines[0].endswith("give it by reference: '{env.REFDNS_TOKEN}' (or {file:PATH})")
    assert "'{env.API_KEY}'" in lines[1] and "'{env.X_API_KEY}'" in lines[2]
    [bearer] = literal_secrets({"headers": {"Authorization": "Bearer abc"}})
    assert "'Bearer {env.AUTHORIZATION}'" in bearer


def test_the_docs_and_scenarios_spell_every_placeholder_one_way() -> None:
    """`{env.NAME}`, `{file:PATH}`, `{run_dir}`... and nothing close to them: a reader
    copies what the docs write. Lines that show a misspelling as bad input say so."""
    root = Path(__file__).resolve().parents[2]
    files = [root / "README.md", *(root / "docs").glob("*.md"), *(root / "scenarios").glob("*")]
    found = [
        f"{path.relative_to(root)}:{n}: {problem}"
        for path in files
        if path.is_file()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "is not a placeholder" not in line and "misspelt" not in line
        for problem in problems(line)
        if "did you mean" in problem
    ]
    assert found == []
