"""Helper services' ports into the target's config; the API's scenario parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.config import InvalidModel, load_scenario
from soak.errors import InputError
from soak.service.api import input_errors, parse_scenario
from soak.targets.base import Running
from soak.targets.binding import bind_services, uses_services
from soak.targets.specs import ProcessTarget


def target(**extra: object) -> ProcessTarget:
    data: dict[str, object] = {
        "runtime": "process",
        "name": "recursor",
        "argv": ["pdns_recursor", "--forward-zones-recurse=.=127.0.0.1:{service.up.port.dns}"],
        "files": [{"dest": "r.conf", "content": "local-port={port.dns}\nup={service.up.host}\n"}],
    }
    data.update(extra)
    return ProcessTarget.model_validate(data)


def upstream(port: int = 5353) -> Running:
    return Running("up", "127.0.0.1", {"dns": port}, 1234, None)


def test_service_ports_filled_own_placeholders_kept() -> None:
    cfg = target()
    assert uses_services(cfg)
    bound = bind_services(cfg, {"up": upstream(5353)})
    assert isinstance(bound, ProcessTarget)
    assert bound.argv[1] == "--forward-zones-recurse=.=127.0.0.1:5353"
    assert bound.files[0].content == "local-port={port.dns}\nup=127.0.0.1\n"
    assert not uses_services(bound)


def test_no_service_placeholders_is_the_same_object() -> None:
    cfg = target(argv=["unbound"], files=[])
    assert bind_services(cfg, {}) is cfg


def test_unknown_service_or_port_is_input_error() -> None:
    with pytest.raises(InputError, match="unknown service 'up'"):
        bind_services(target(), {})
    with pytest.raises(InputError, match="no port 'dns'"):
        bind_services(target(), {"up": Running("up", "127.0.0.1", {"web": 1}, 1, None)})


SCENARIO = b"""
name: t
target: {runtime: process, argv: [unbound]}
phases: [{name: a, duration_s: 10m}, {name: b, duration_s: 30m}]
"""


def test_parse_scenario_yaml_json_base_dir_and_duration() -> None:
    sc = parse_scenario(SCENARIO, "/srv/scenarios", "4m")
    assert sc.base_dir == Path("/srv/scenarios")
    assert [p.duration_s for p in sc.phases] == pytest.approx([60.0, 180.0])
    as_json = sc.model_dump_json().encode()
    assert parse_scenario(as_json, None, None).phases[1].duration_s == pytest.approx(180.0)


BAD_FIELDS = b"name: t\ntarget: {runtime: process}\nphases: []\nbogus: 1\n"


def test_parse_scenario_errors_name_the_field() -> None:
    with pytest.raises(InvalidModel) as info:
        parse_scenario(BAD_FIELDS, None, None)
    paths = {e["path"] for e in input_errors(info.value)}
    assert {"target.process.argv", "phases", "bogus"} <= paths
    with pytest.raises(InputError, match=r"^body: a scenario is a YAML mapping$"):
        parse_scenario(b"- a list\n", None, None)
    with pytest.raises(InputError, match=r"^body: line 2 not valid YAML"):
        parse_scenario(b"{name: [\n", None, None)
    with pytest.raises(InputError):
        parse_scenario(SCENARIO, "relative/dir", None)
    with pytest.raises(InputError):
        parse_scenario(SCENARIO, None, "soon")


def test_the_api_and_the_command_line_say_the_same_lines(tmp_path: Path) -> None:
    """One loader: a body's errors are the lines `soak validate` prints for the file."""
    path = tmp_path / "s.yaml"
    path.write_bytes(BAD_FIELDS)
    with pytest.raises(InvalidModel) as from_file:
        load_scenario(path)
    with pytest.raises(InvalidModel) as from_body:
        parse_scenario(BAD_FIELDS, None, None)
    assert str(from_file.value).replace(str(path), "body") == str(from_body.value)
    assert from_file.value.fields == from_body.value.fields
