"""soak.placeholders: the one renderer, with what each of its three users needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soak.errors import InputError
from soak.placeholders import (
    Placeholders,
    fill,
    fill_services,
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
