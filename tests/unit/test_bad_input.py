"""Bad input, one row of docs/bad-input.md each: one line on stderr, exit 2, nothing started.

Every case goes through each path that takes it: `soak validate`, `soak start
--foreground` (the real command line, with a scenario whose helper and target would
be real processes) and the service's `POST /runs` (the in-process API: 422 with the
line, no record). The pre-flight comes first, so no run directory is made and no
process is started.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from soak.cli import main
from soak.service.client import _message
from tests.support.api import AUTH, api_client
from tests.unit.test_traffic import good_pcap

ROOT = Path(__file__).resolve().parents[2]

Case = Callable[[Path, dict[str, Any]], list[str]]  # writes files; returns extra argv


def base_scenario() -> dict[str, Any]:
    return {
        "name": "bad-input",
        "services": [{"runtime": "process", "name": "helper", "argv": ["sleep", "600"]}],
        "target": {
            "runtime": "process",
            "argv": ["sleep", "600"],
            "ports": {"dns": {"protocol": "both"}},
            "files": [{"dest": "x.conf", "template": "x.conf.in"}],
        },
        "load": {"rate_qps": 100, "mix": [{"name": "q", "file": "q.txt"}]},
        "phases": [{"name": "steady", "duration_s": "10s"}],
    }


def write_base(tmp: Path, sc: dict[str, Any]) -> None:
    (tmp / "q.txt").write_text("www.example.test A\n# a comment\nexample.test AAAA\n")
    (tmp / "x.conf.in").write_text("port={port.dns}\n")


def validate_exit(
    tmp: Path, capsys: pytest.CaptureFixture[str], sc: dict[str, Any]
) -> tuple[int, str, list[str]]:
    """`soak validate` of `sc` (its files written beside it): exit code, stdout, stderr lines."""
    write_base(tmp, sc)
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(sc))
    with pytest.raises(SystemExit) as exited:
        main(["validate", str(path)])
    out = capsys.readouterr()
    code = exited.value.code
    return code if isinstance(code, int) else 1, out.out, out.err.strip().splitlines()


def _set(path: str, value: Any, *more: Any) -> Case:
    """Set `path` to `value` (and further path, value pairs) in the scenario."""
    pairs = [(path, value), *zip(more[::2], more[1::2], strict=True)]

    def case(tmp: Path, sc: dict[str, Any]) -> list[str]:
        for dotted, new in pairs:
            node: Any = sc
            keys = dotted.split(".")
            for key in keys[:-1]:
                node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
            node[int(keys[-1]) if isinstance(node, list) else keys[-1]] = new
        return []

    return case


def _file(name: str, data: bytes) -> Case:
    def case(tmp: Path, sc: dict[str, Any]) -> list[str]:
        (tmp / name).write_bytes(data)
        return []

    return case


def _argv(*extra: str) -> Case:
    return lambda tmp, sc: list(extra)


def _remove(name: str) -> Case:
    def case(tmp: Path, sc: dict[str, Any]) -> list[str]:
        (tmp / name).unlink()
        return []

    return case


def _port_in_use(tmp: Path, sc: dict[str, Any]) -> list[str]:
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    HELD.append(holder)
    sc["target"]["ports"]["dns"] = {"host": holder.getsockname()[1], "protocol": "both"}
    return []


def _both(first: Case, second: Case) -> Case:
    return lambda tmp, sc: first(tmp, sc) + second(tmp, sc)


REPLAY = ("load.mix", [], "load.replay", {"file": "c.pcap"})  # a replay instead of the mix

HELD: list[socket.socket] = []  # sockets a case holds until the test ends

SCENARIO_RAW = "s.yaml"  # cases that write the scenario's bytes themselves

# (row id, how to make it bad, what its one line says)
CASES: list[tuple[str, Case, str]] = [
    ("scenario-not-utf8", _file(SCENARIO_RAW, b"name: x\n\xff\xfe\n"),
     "s.yaml: not UTF-8 text (byte 0xff at offset 8)"),
    ("scenario-not-yaml", _file(SCENARIO_RAW, b"name: [x\n"), "not valid YAML"),
    ("scenario-not-mapping", _file(SCENARIO_RAW, b"- a\n- b\n"), "a scenario is a YAML mapping"),
    ("scenario-unknown-key", _set("bogus", 1), "bogus: Extra inputs are not permitted"),
    ("scenario-misspelt-key", _set("phasess", []),
     "phasess: Extra inputs are not permitted (did you mean phases?)"),
    ("scenario-misspelt-nested-key", _set("load.rate_qsp", 10),
     "load.rate_qsp: Extra inputs are not permitted (did you mean rate_qps?)"),
    ("scenario-misspelt-target-key", _set("target.argvv", ["sleep"]),
     "argvv: Extra inputs are not permitted (did you mean argv?)"),
    ("scenario-missing", _argv("--set", "name=x", "--", "missing.yaml"), "cannot read missing"),
    ("query-file-missing", _remove("q.txt"), "q.txt: No such file or directory"),
    ("query-line-malformed", _file("q.txt", b"www.example.test A\nexample.test A extra\n"),
     "q.txt line 2: malformed query line 'example.test A extra'"),
    ("query-type-unknown", _file("q.txt", b"www.example.test AAA\n"),
     "q.txt line 1: unknown record type 'AAA'"),
    ("query-name-malformed", _file("q.txt", b"a..b A\n"), "q.txt line 1: malformed name 'a..b'"),
    ("query-file-not-utf8", _file("q.txt", b"www.\xff.test A\n"),
     "q.txt: not UTF-8 text (byte 0xff at offset 4)"),
    ("query-file-empty", _file("q.txt", b"# nothing\n\n"), "q.txt: no queries"),
    ("template-missing", _remove("x.conf.in"), "cannot read template"),
    ("template-not-utf8", _file("x.conf.in", b"\xc3\x28\n"), "x.conf.in: not UTF-8 text"),
    ("secret-env-unset", _set("services.0.env", {"T": "{env.SOAK_TEST_NEVER_SET}"}),
     "services.0.env.T: {env.SOAK_TEST_NEVER_SET}: environment variable SOAK_TEST_NEVER_SET"
     " is not set"),
    ("secret-file-missing", _set("target.ready", {"probes": [
        {"kind": "http", "port": "dns", "headers": {"X-API-Key": "{file:no-token}"}}]}),
     "target.ready.probes.0.headers.X-API-Key: {file:no-token}: cannot read"),
    ("secret-in-template", _file("x.conf.in", b"key={env.SOAK_TEST_NEVER_SET}\n"),
     "target: file x.conf: {env.SOAK_TEST_NEVER_SET}: environment variable"),
    ("rate-above-engine", _set("load.rate_qps", 1_000_000_000),
     "load.rate_qps: 1,000,000,000 q/s is more than 1 load worker(s) can send over UDP"),
    ("phase-rate-above-engine", _set("phases.0.rate_qps", 500_000, "load.workers", 1),
     "phases.0.rate_qps: 500,000 q/s is more than 1 load worker(s) can send over UDP"),
    ("rate-above-engine-tcp", _set("load.rate_qps", 150_000, "load.protocol", "tcp"),
     "150,000 q/s is more than 1 load worker(s) can send over TCP (at most 100,000 q/s"),
    ("rate-above-engine-doh", _set("load.rate_qps", 150_000, "load.protocol", "doh"),
     "150,000 q/s is more than 1 load worker(s) can send over DOH (at most 100,000 q/s"),
    ("rate-negative", _set("load.rate_qps", -5), "load.rate_qps: Input should be greater than"),
    ("rate-zero", _set("load.rate_qps", 0),
     "load.rate_qps: Value error, 0 q/s sends nothing; for as fast as the server answers"
     " write `rate_qps: max`"),
    ("phase-rate-zero", _set("phases.0.rate_qps", 0), "phases.0.rate_qps: Value error, 0 q/s"),
    ("duration-infinite", _set("phases.0.duration_s", float("inf")), "not a duration: inf"),
    ("duration-too-long", _set("phases.0.duration_s", "400d"), "is longer than the most"),
    ("duration-flag-too-long", _argv("--duration", "1000d"), "--duration: duration '1000d'"),
    ("duration-flag-garbage", _argv("--duration", "soon"), "--duration: not a duration: 'soon'"),
    ("threshold-too-large", _set("leaks.thresholds", {"rss_anon_bytes": "2000TiB/h"}),
     "is larger than the most soak takes"),
    ("set-without-value", _argv("--set", "load.rate_qps"), "--set takes key.path=value"),
    ("binary-not-on-path", _set("target.argv", ["no-such-dns-server"]),
     "target: binary not found on PATH: no-such-dns-server"),
    ("binary-path-missing", _set("services.0.argv", ["./bin/none"]),
     "helper: binary not found or not executable:"),
    ("host-not-loopback", _set("target.host", "10.1.2.3"),
     "refusing to send to 10.1.2.3 (10.1.2.3): only loopback unless allow_targets"),
    ("allow-targets-not-cidr", _set("target.host", "10.1.2.3", "allow_targets", ["10.x/8"]),
     "not a CIDR in allow_targets: '10.x/8'"),
    ("port-in-use", _port_in_use, "target: port dns (127.0.0.1:"),
    ("agents-count-zero", _set("load.agents", {"count": 0}),
     "load.agents.count: Input should be greater than or equal to 1"),
    ("sampler-agent-local-target", _set("samplers.agent", {"engine": "local", "pid": 1}),
     "samplers.agent: only for a target on another node (`target.runtime: external`)"),
    ("placeholder-env-colon", _set("target.env", {"T": "{env:SOAK_TOKEN}"}),
     "target.env.T: {env:SOAK_TOKEN} is not a placeholder: did you mean {env.SOAK_TOKEN}?"),
    ("placeholder-file-dot", _set("target.ready", {"probes": [
        {"kind": "http", "port": "dns", "headers": {"X-API-Key": "{file.token.txt}"}}]}),
     "target.ready.probes.0.headers.X-API-Key: {file.token.txt} is not a placeholder:"
     " did you mean {file:token.txt}?"),
    ("placeholder-rundir", _set("target.argv", ["sleep", "{rundir}/log"]),
     "target.argv.1: {rundir} is not a placeholder: did you mean {run_dir}?"),
    ("placeholder-typo-in-template", _file("x.conf.in", b"logfile: {rundir}/x.log\n"),
     "target: file x.conf: {rundir} is not a placeholder: did you mean {run_dir}?"),
    ("placeholder-unknown-name", _set("services.0.argv", ["sleep", "{token}"]),
     "services.0.argv.1: {token} is not a placeholder: the placeholders are {data_dir},"),
    ("placeholder-unknown-port-argv", _set("target.argv", ["sleep", "{port.dnss}"]),
     "target.argv.1: unknown port {port.dnss} (named ports: dns)"),
    ("placeholder-unknown-port-env", _set("target.env", {"PORT": "{port.api}"}),
     "target.env.PORT: unknown port {port.api} (named ports: dns)"),
    ("placeholder-unknown-port-file", _file("x.conf.in", b"port={port.dnss}\n"),
     "file x.conf: unknown port {port.dnss} (named ports: dns)"),
    ("placeholder-unknown-service", _set("target.argv", ["sleep", "{service.upstream.host}"]),
     "target.argv.1: unknown service 'upstream' (services: helper)"),
    ("placeholder-unknown-service-port",
     _set("target.argv", ["sleep", "{service.helper.port.dns}"]),
     "target.argv.1: service 'helper' has no port 'dns'"),
    ("placeholder-service-in-a-helper",
     _set("services.0.argv", ["sleep", "{service.helper.host}"]),
     "helper.argv.1: {service.*} placeholders are filled only in the target"),
    ("placeholder-data-dir-in-data-dir", _set("target.data_dir", "{data_dir}/x"),
     "target.data_dir: {data_dir} cannot be used here"),
    ("probe-unknown-port", _set("target.ready", {"probes": [{"kind": "tcp", "port": "api"}]}),
     "target.ready.probes.0: target has no port 'api' (named ports: dns)"),
    ("dig-probe-unknown-port", _set("samplers.dig", [{"name": "a.test", "port": "dnss"}]),
     "samplers.dig.0: target has no port 'dnss' (named ports: dns)"),
    ("agents-rate-too-small", _set("load.rate_qps", 0.001, "load.agents", {"count": 2}),
     "load.agents: rate 0.001 q/s is too small for 2 agents"),
    ("replay-phase-rate", _set(*REPLAY, "phases.0.rate_qps", 50),
     "phases.0.rate_qps: a replay keeps its capture's timing"),
    ("replay-agents", _set(*REPLAY, "load.agents", {"count": 2}),
     "load.replay: a replay plays from the run's own process; drop load.agents"),
    ("replay-capture-cut", _both(_set(*REPLAY), _file("c.pcap", good_pcap()[:-9])),
     "c.pcap: truncated pcap"),
    ("capture-source-unknown", _set("capture", {"source": "netflow"}),
     "capture.source: Input should be 'dnstap'"),
    ("capture-socket-too-long", _set("capture", {"socket": "/tmp/" + "s" * 110}),
     "capture.socket: /tmp/sss"),
    ("capture-socket-no-dir", _set("capture", {"socket": "no-such-dir/tap.sock"}),
     "no-such-dir is not a directory"),
    ("capture-pcap-with-socket", _set("capture", {"source": "pcap", "socket": "t.sock"}),
     "capture.socket is dnstap's; a pcap capture listens on `interface`"),
    ("capture-max-queries-zero", _set("capture", {"max_queries": 0}),
     "capture.max_queries: Input should be greater than or equal to 1"),
    ("replay-from-run-unknown", _set("load.mix", [], "load.replay", {"from_run": "x-1"}),
     "load.replay.from_run: x-1: no such run in"),
    ("replay-file-and-from-run",
     _set("load.mix", [], "load.replay", {"file": "c.pcap", "from_run": "x-1"}),
     "load.replay: Value error, give file or from_run, not both"),
    ("replay-rewrite-zone-too-long",
     _set("load.mix", [], "load.replay",
          {"file": "c.pcap", "rewrite": {"zones": [".".join(["z" * 60] * 4)]}}),
     "': too long for a 12-byte label (a name is at most 255 bytes)"),
]  # fmt: skip

# What only the command line takes (flags, a file to read): no scenario body to post.
CLI_ONLY = {"scenario-missing", "duration-flag-too-long", "duration-flag-garbage",
            "set-without-value"}  # fmt: skip
# A run's id is looked up where the run would start (its data directory): not by
# `soak validate`, which has none.
NOT_VALIDATED = {"replay-from-run-unknown"}
# The service's line where it words the same problem for a posted body.
SERVICE_LINE = {
    "scenario-not-utf8": "body: not UTF-8 text (byte 0xff at offset 8)",
    # The service reads the secrets: its environment, not the client's, lacks the variable.
    "secret-env-unset": "services.0.env.T: {env.SOAK_TEST_NEVER_SET}: environment variable"
    " SOAK_TEST_NEVER_SET is not set in the environment of `soak serve`, which reads it",
}
PATHS = ("validate", "foreground", "service")


@pytest.fixture(autouse=True)
def _release_held() -> Any:
    yield
    while HELD:
        HELD.pop().close()


def _path_cases() -> list[Any]:
    return [
        pytest.param(path, row, make_bad, line, id=f"{path}-{row}")
        for row, make_bad, line in CASES
        for path in PATHS
        if not (row in CLI_ONLY and path != "foreground")
        and not (row in NOT_VALIDATED and path == "validate")
    ]


@pytest.mark.parametrize(("path", "row", "make_bad", "line"), _path_cases())
def test_bad_input_is_one_line_and_exit_2(
    path: str,
    row: str,
    make_bad: Case,
    line: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    sc = base_scenario()
    write_base(tmp_path, sc)
    extra = make_bad(tmp_path, sc)
    if not (tmp_path / SCENARIO_RAW).exists():
        (tmp_path / SCENARIO_RAW).write_text(yaml.safe_dump(sc))
    data = tmp_path / "data"
    if path == "service":
        _refused_by_the_service(tmp_path, data, SERVICE_LINE.get(row, line))
        return
    if path == "validate":
        argv = ["validate"]
    else:
        argv = ["start", "--foreground", "--data-dir", str(data)]
    argv += extra if "--" in extra else [*extra, SCENARIO_RAW]
    argv = [a for a in argv if a != "--"]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2, err
    assert len(err) == 1 and line in err[0], err
    assert err[0].startswith("soak: ") and "internal error" not in err[0]
    assert not (data / "runs").exists()  # nothing was started
    if data.exists():  # no record either
        assert _records(data) == []


def _records(data: Path) -> list[Any]:
    from soak.runs.layout import DataDir
    from soak.runs.state import StateStore

    state = StateStore(DataDir(data).state_db)
    try:
        return state.list_runs()
    finally:
        state.close()


def _refused_by_the_service(tmp: Path, data: Path, line: str) -> None:
    """POST /runs: 422 with the line; no record, no run directory."""
    body = (tmp / SCENARIO_RAW).read_bytes()
    with api_client(data) as client:
        r = client.post("/runs", params={"base_dir": str(tmp)}, content=body, headers=AUTH)
        assert r.status_code == 422, r.text
        assert line in _message(r), _message(r)
        assert "\n" not in _message(r) and not _message(r).startswith("(body)")
        assert client.get("/runs", headers=AUTH).json() == {"runs": []}
    assert not (data / "runs").exists() or not any((data / "runs").iterdir())
