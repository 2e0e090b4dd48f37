"""The process runtime with real servers, configured as a scenario would configure them.

Config files are rendered from templates ({port.dns}, {data_dir}, {run_dir}) made by
the shared starters' config functions, so the servers run exactly as elsewhere.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import TypeAdapter

from soak.errors import TargetStartError
from soak.probes import dns_query, http_request
from soak.procfs import pid_alive, read_fd_limit
from soak.runs.layout import TargetFiles
from soak.runs.runid import new_run_id
from soak.targets import Target, build_target
from soak.targets.process import group_alive
from soak.targets.specs import TargetConfig
from tests.support.pdns import PDNS_API_KEY, PDNS_SCHEMA, pdns_config
from tests.support.servers import DEFAULT_LOCAL_DATA, free_port, unbound_conf

pytestmark = pytest.mark.integration

ZONE_SQL = """INSERT INTO domains (name, type) VALUES ('example.test', 'NATIVE');
INSERT INTO records (domain_id, name, type, content, ttl, disabled, auth) VALUES
 (1, 'example.test', 'SOA', 'ns.example.test. hostmaster.example.test. 1 3600 600 86400 3600',
  3600, 0, 1),
 (1, 'www.example.test', 'A', '192.0.2.10', 3600, 0, 1);
"""


def target(tmp: Path, spec: str, **fmt: Any) -> Target:
    return built(tmp, yaml.safe_load(spec.format(**fmt)))


def built(tmp: Path, spec: dict[str, Any]) -> Target:
    cfg = TypeAdapter(TargetConfig).validate_python(spec)
    return build_target(
        cfg, files=TargetFiles(tmp / "run"), run_id=new_run_id("t-proc"), base_dir=tmp
    )


def shell_target(tmp: Path, name: str, script: str, **more: Any) -> Target:
    """A process target that runs `sh -c script`, with one DNS port."""
    argv = ["sh", "-c", script]
    return built(
        tmp, {"name": name, "runtime": "process", "argv": argv, "ports": {"dns": {}}, **more}
    )


def gone(pid: int | None) -> bool:
    assert pid is not None
    return not pid_alive(pid) and not group_alive(pid)


def test_pdns_server_ready_by_http_and_dns_then_reattached_and_stopped(tmp_path: Path) -> None:
    conf = pdns_config(
        Path("{run_dir}"), Path("{data_dir}/pdns.sqlite3"), "{port.dns}", "{port.web}", PDNS_API_KEY
    )  # type: ignore[arg-type]
    (tmp_path / "pdns.conf.tmpl").write_text(conf)
    (tmp_path / "zone.sql").write_text(ZONE_SQL)
    spec = """
name: pdns
runtime: process
argv: [sh, -c, "sqlite3 {{data_dir}}/pdns.sqlite3 < {schema} && sqlite3 {{data_dir}}/pdns.sqlite3 < {{run_dir}}/zone.sql && exec pdns_server --config-dir={{run_dir}}"]
ports: {{dns: {{protocol: both}}, web: {{}}}}
files:
  - {{dest: pdns.conf, template: pdns.conf.tmpl}}
  - {{dest: zone.sql, template: zone.sql}}
ready:
  timeout_s: 30
  probes:
    - {{kind: http, port: web, path: /api/v1/servers/localhost, headers: {{X-API-Key: {key}}}}}
    - {{kind: dns, name: www.example.test., answer: 192.0.2.10}}
"""  # noqa: E501
    pdns = target(tmp_path, spec, schema=PDNS_SCHEMA, key=PDNS_API_KEY)
    pdns.start()
    running = pdns.wait_ready()
    try:
        assert running.ready_after_s is not None and running.ready_after_s > 0
        assert running.pid is not None
        assert Path(f"/proc/{running.pid}/comm").read_text().strip() == "pdns_server"
        assert running.fd_limit == read_fd_limit(running.pid)
        result = dns_query(*running.address("dns"), "www.example.test.", protocol="tcp")
        assert result.answers == ["192.0.2.10"]
        web = http_request("GET", f"http://127.0.0.1:{running.ports['web']}/metrics")
        assert web.status == 200 and b"pdns_auth" in web.body
        assert running.log_path is not None and running.log_path.stat().st_size > 0

        # A restarted soak service adopts the live process and can stop it.
        adopted = target(tmp_path, spec, schema=PDNS_SCHEMA, key=PDNS_API_KEY)
        again = adopted.attach(running.to_state())
        assert again.pid == running.pid and adopted.poll() is None
        assert adopted.stop() is not None
    finally:
        pdns.stop()
    assert gone(running.pid)
    assert pdns.poll() is not None  # the parent still learns how it ended


def test_recursor_forwarding_to_dnsmasq_helper_and_kill9_seen(tmp_path: Path) -> None:
    upstream_port = free_port()
    helper = target(
        tmp_path,
        """
name: upstream
runtime: process
argv: [dnsmasq, --no-daemon, "--port={{port.dns}}", --listen-address=127.0.0.1,
       --bind-interfaces, --no-resolv, --no-hosts, --cache-size=0, "--address=/#/192.0.2.1",
       --local-ttl=3600, --user=root, "--pid-file={{run_dir}}/dnsmasq.pid"]
ports: {{dns: {{host: {port}, protocol: both}}}}
ready:
  probes: [{{kind: dns, name: anything.test., answer: 192.0.2.1}}]
""",
        port=upstream_port,
    )
    recursor = target(
        tmp_path,
        """
name: recursor
runtime: process
argv: [pdns_recursor, "--config-dir={{run_dir}}/recursor"]
ports: {{dns: {{protocol: both}}, web: {{}}}}
files:
  - dest: recursor/recursor.conf
    content: |
      local-address=127.0.0.1
      local-port={{port.dns}}
      forward-zones-recurse=.=127.0.0.1:{port}
      hint-file=no
      security-poll-suffix=
      dnssec=process-no-validate
      daemon=no
      write-pid=no
      # relative to the cwd (the data dir): a unix socket path is limited to 107 bytes
      socket-dir=.
      webserver=yes
      webserver-address=127.0.0.1
      webserver-port={{port.web}}
      webserver-allow-from=127.0.0.0/8
      threads=1
      setuid=
      setgid=
ready:
  probes: [{{kind: tcp, port: web}}, {{kind: dns, name: www.example.org., answer: 192.0.2.1}}]
  condition_timeout_s: 20
  conditions:
    second name forwarded: {{kind: dns, name: other.example.net., answer: 192.0.2.1}}
""",
        port=upstream_port,
    )
    helper.start()
    try:
        helper.wait_ready()
        recursor.start()
        running = recursor.wait_ready()
        assert "second name forwarded" in running.conditions_s
        first = dns_query("127.0.0.1", running.ports["dns"], "cached.example.org.")
        time.sleep(1.1)
        second = dns_query("127.0.0.1", running.ports["dns"], "cached.example.org.")
        # --local-ttl keeps the answer cached: the TTL counts down instead of staying 0.
        assert first.ttls and 3500 < first.ttls[0] <= 3600
        assert second.ttls and second.ttls[0] < first.ttls[0]

        assert running.pid is not None
        os.kill(running.pid, signal.SIGKILL)
        deadline_s = time.monotonic() + 10
        while (info := recursor.poll()) is None and time.monotonic() < deadline_s:
            time.sleep(0.05)
        assert info is not None and info.signal == signal.SIGKILL
        assert info.describe() == "killed by signal 9"
        assert recursor.stop() == info
    finally:
        recursor.stop()
        helper.stop()
    assert gone(running.pid)
    assert helper.running is not None and gone(helper.running.pid)


def test_unbound_condition_and_restart_keep_ports(tmp_path: Path) -> None:
    (tmp_path / "unbound.conf.tmpl").write_text(unbound_conf("{port.dns}", DEFAULT_LOCAL_DATA))  # type: ignore[arg-type]
    unbound = target(
        tmp_path,
        """
name: unbound
runtime: process
argv: [unbound, -d, -c, "{{run_dir}}/unbound.conf"]
ports: {{dns: {{protocol: both}}}}
files: [{{dest: unbound.conf, template: unbound.conf.tmpl}}]
on_exit: restart
ready:
  probes: [{{kind: dns, name: www.example.test., protocol: tcp, answer: 192.0.2.10}}]
  conditions:
    blocked answers 0.0.0.0: {{kind: dns, name: blocked.example.test., answer: 0.0.0.0}}
""",
    )
    unbound.start()
    try:
        first = unbound.wait_ready()
        pid, port = first.pid, first.ports["dns"]
        # Conditions are tried from the first probe on: the UDP answer may come before the
        # TCP probe's (unbound opens its UDP socket first), so before or after ready.
        met_s = first.conditions_s["blocked answers 0.0.0.0"]
        assert 0 < met_s <= time.monotonic() - first.started_monotonic_s
        running = unbound.restart()
        assert running.restarts == 1 and running.ports["dns"] == port and running.pid != pid
        unbound.wait_ready()
        assert dns_query("127.0.0.1", port, "mail.example.test.").answers == ["192.0.2.11"]
        assert gone(pid)
    finally:
        info = unbound.stop()
    assert info is not None and info.exit_code == 0  # unbound exits cleanly on SIGTERM
    assert gone(running.pid)


# ---------------------------------------------------------------- bad input


def start_fails(t: Target) -> TargetStartError:
    with pytest.raises(TargetStartError) as caught:
        t.start()
        t.wait_ready()
    exc = caught.value
    assert exc.exit_code == 2 and "\n" not in str(exc)
    return exc


def test_missing_binary(tmp_path: Path) -> None:
    t = target(tmp_path, "{{name: srv, runtime: process, argv: [no-such-dns-server, -d]}}")
    assert "binary not found on PATH: no-such-dns-server" in str(start_fails(t))
    t = target(tmp_path, "{{name: srv, runtime: process, argv: [./bin/nope]}}")
    assert "not executable" in str(start_fails(t))
    assert t.running is None


def test_port_already_taken(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as busy:
        busy.bind(("127.0.0.1", 0))
        port = busy.getsockname()[1]
        spec = (
            "{{name: srv, runtime: process, argv: [sleep, '30'],"
            " ports: {{dns: {{host: {p}, protocol: both}}}}}}"
        )
        t = target(tmp_path, spec, p=port)
        exc = start_fails(t)
    assert f"srv: port dns (127.0.0.1:{port}/both) is already in use" in str(exc)
    assert t.running is None  # refused before anything was started


def test_never_ready_quotes_the_log_and_leaves_nothing(tmp_path: Path) -> None:
    script = "echo loading 1M-entry list; sleep 0.1; echo still compiling >&2; sleep 60 & wait"
    ready = {"timeout_s": 1, "probes": [{"kind": "tcp", "port": "dns"}]}
    t = shell_target(tmp_path, "slow", script, ready=ready)
    exc = start_fails(t)
    message = str(exc)
    assert "not ready after 1 s" in message and "nothing accepts" in message
    assert "loading 1M-entry list | still compiling" in message
    assert t.running is not None and gone(t.running.pid)  # the background sleep went too


def test_exit_before_ready(tmp_path: Path) -> None:
    t = shell_target(tmp_path, "crash", "echo fatal: bad config line 3; exit 3")
    message = str(start_fails(t))
    assert "exited with code 3 before it was ready" in message
    assert "fatal: bad config line 3" in message
