"""JSON paths and `{{name}}` values with their secrets."""

from __future__ import annotations

import pytest

from soak.errors import InputError
from soak.placeholders import fill as fill_placeholders
from soak.upgrade import jsonpath
from soak.upgrade.template import Values, referenced_names

ZONE = {
    "name": "example.test.",
    "rrsets": [
        {"name": "www.example.test.", "type": "A", "records": [{"content": "192.0.2.10"}]},
        {"name": "example.test.", "type": "MX", "records": [{"content": "10 mail."}]},
        {"name": "www.example.test.", "type": "AAAA", "records": [{"content": "2001:db8::10"}]},
    ],
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("$", [ZONE]),
        ("$.name", ["example.test."]),
        ("$['name']", ["example.test."]),
        ("$.rrsets[1].type", ["MX"]),
        ("$.rrsets[-1].type", ["AAAA"]),
        ("$.rrsets[*].type", ["A", "MX", "AAAA"]),
        ("$.rrsets[?(@.type=='A')].records[*].content", ["192.0.2.10"]),
        ('$.rrsets[?(@.name=="www.example.test.")].type', ["A", "AAAA"]),
        ("$.rrsets[7].type", []),
        ("$.missing.deeper", []),
        ("$.name.*", []),
    ],
)
def test_select(path: str, expected: list[object]) -> None:
    assert jsonpath.select(ZONE, path) == expected


def test_filter_on_numbers_and_lists_at_the_top() -> None:
    doc = [{"id": 1, "ok": True}, {"id": 2, "ok": False}]
    assert jsonpath.select(doc, "$[?(@.id==2)].ok") == [False]
    assert jsonpath.select(doc, "$[?(@.ok==true)].id") == [1]
    assert jsonpath.select(doc, "$[0].id") == [1]


@pytest.mark.parametrize("bad", ["name", "$.", "$[", "$..x", "$[?(@.a)]"])
def test_malformed_paths_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        jsonpath.parse(bad)


def test_lookup_order_saved_then_vars_then_env() -> None:
    values = Values({"zone": "a.test", "base": "/api/{{zone}}"}, {"zone": "env.test", "X": "x"})
    assert values.render("{{zone}}") == "a.test"
    assert values.render("{{base}}/records") == "/api/a.test/records"  # vars may use vars
    assert values.render("{{X}} {{env.X}}") == "x x"
    values.save("zone", "saved.test")
    assert values.render({"path": ["{{ zone }}"], "n": 3}) == {"path": ["saved.test"], "n": 3}
    with pytest.raises(InputError, match="nope"):
        values.render("{{nope}}")


def test_secrets_are_masked_once_seen() -> None:
    values = Values(
        {"plain": "visible"},
        {"DB_PASSWORD": "hunter22"},
        secret_names=["plain", "api_token", "DB_PASSWORD"],
    )
    values.save("api_token", "tok-123456")
    values.save("zone_id", "example.test.")
    rendered = values.render("{{env.DB_PASSWORD}}:{{plain}}")
    assert rendered == "hunter22:visible"
    text = "sent tok-123456 and hunter22 and visible for example.test."
    assert values.redact(text) == "sent *** and *** and *** for example.test."
    assert values.redact_obj({"a": ["tok-123456"]}) == {"a": ["***"]}


def test_only_the_declared_secrets_are_masked() -> None:
    # DNS data named like a credential (a DNSKEY, a key id) is shown as it is.
    values = Values({}, {"ADMIN_TOKEN": "tok-abcdef"}, secret_names=["admin_password"])
    values.save("dnskey", "257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0d")
    values.save("key_id", "20326")
    values.save("admin_password", "hunter22")
    values.render("{{env.ADMIN_TOKEN}}")
    text = "dnskey 257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0d id 20326 tok-abcdef hunter22"
    assert values.redact(text) == text.replace("hunter22", "***")


def test_short_secret_values_do_not_garble_messages() -> None:
    values = Values({}, {}, secret_names=["key"])
    values.save("key", "1")
    assert values.redact("status 201") == "status 201"


def test_referenced_names_and_placeholders() -> None:
    obj = {"a": ["{{x}} {{env.Y}}", {"{{k}}": 1}], "b": "{data_dir}/{port.api}"}
    assert referenced_names(obj) == {"x", "env.Y", "k"}
    text = fill_placeholders(
        "{data_dir}/db {port.api} {json} {port.none}",
        {
            "data_dir": "/d",
            "port.api": "81",
        },
    )
    assert text == "/d/db 81 {json} {port.none}"
