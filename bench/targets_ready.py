"""Targets: start-to-ready and stop times of real servers through each runtime.

    .venv/bin/python bench/targets_ready.py               # 5 starts of each
    .venv/bin/python bench/targets_ready.py --repeat 10 --only docker-pdns
    .venv/bin/python bench/targets_ready.py --smoke       # one start of each

start-to-ready is what soak records as `ready_after_s` (from just before the
process is spawned or the container created, until every readiness probe
passes; resolution: the readiness interval, 50 ms). The reference for the
docker figure is the docker CLI doing the same by hand: `docker run -d` then
a dig loop until the server answers.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support

import yaml  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402
from tests.support.pdns import PDNS_API_KEY, PDNS_SCHEMA, pdns_config  # noqa: E402
from tests.support.servers import DEFAULT_LOCAL_DATA, dnsmasq_upstream, free_port, unbound_conf  # noqa: E402

from soak.probes import dns_query  # noqa: E402
from soak.runs.layout import TargetFiles  # noqa: E402
from soak.targets import build_target, cleanup_stale  # noqa: E402
from soak.targets.specs import TargetConfig  # noqa: E402

PROBE_PDNS = f"""
  probes:
    - {{kind: http, port: web, path: /api/v1/servers/localhost,
       headers: {{X-API-Key: {PDNS_API_KEY}}}}}
    - {{kind: dns, name: example.test., type: SOA, rcode: REFUSED}}
"""

SPECS = {
    "process-unbound": """
name: unbound
runtime: process
argv: [unbound, -d, -c, "{run_dir}/unbound.conf"]
ports: {dns: {protocol: both}}
files: [{dest: unbound.conf, template: unbound.conf.tmpl}]
ready:
  probes: [{kind: dns, name: www.example.test., answer: 192.0.2.10}]
""",
    "process-pdns": f"""
name: pdns
runtime: process
argv: [sh, -c, "sqlite3 {{data_dir}}/db < {PDNS_SCHEMA}
       && exec pdns_server --config-dir={{run_dir}}"]
ports: {{dns: {{protocol: both}}, web: {{}}}}
files: [{{dest: pdns.conf, template: pdns.conf.tmpl}}]
ready:
{PROBE_PDNS}""",
    "process-recursor": """
name: recursor
runtime: process
argv: [pdns_recursor, "--config-dir={run_dir}", "--local-port={port.dns}",
       --local-address=127.0.0.1,
       "--forward-zones-recurse=.=127.0.0.1:UPSTREAM", --hint-file=no, --security-poll-suffix=,
       --dnssec=process-no-validate, --daemon=no, --write-pid=no, "--socket-dir={data_dir}",
       --threads=1, --setuid=, --setgid=]
ports: {dns: {protocol: both}}
ready:
  probes: [{kind: dns, name: www.example.org., answer: 192.0.2.1}]
""",
    "docker-pdns": f"""
name: pdns
runtime: docker
image: soak-test/pdns-auth
ports: {{dns: {{container: 5300, protocol: both}}, web: {{container: 8081}}}}
volume: {{mount: /var/lib/powerdns}}
read_only: true
tmpfs: [/tmp]
cap_drop: [ALL]
ready:
{PROBE_PDNS}""",
    "docker-unbound-host": """
name: unbound
runtime: docker
image: soak-test/unbound
network: host
user: root
ports: {dns: {protocol: both}}
files: [{dest: unbound.conf, template: unbound.conf.tmpl}]
mounts: [{source: "{run_dir}/unbound.conf", target: /etc/unbound/soak.conf, read_only: true}]
ready:
  probes: [{kind: dns, name: www.example.test., answer: 192.0.2.10}]
""",
}


def templates(base: Path) -> None:
    (base / "unbound.conf.tmpl").write_text(unbound_conf("{port.dns}", DEFAULT_LOCAL_DATA))  # type: ignore[arg-type]
    conf = pdns_config(
        Path("{run_dir}"), Path("{data_dir}/db"), "{port.dns}", "{port.web}", PDNS_API_KEY
    )  # type: ignore[arg-type]
    (base / "pdns.conf.tmpl").write_text(conf)


def one(kind: str, base: Path, upstream: int) -> tuple[float, float]:
    spec = SPECS[kind].replace("UPSTREAM", str(upstream))
    cfg = TypeAdapter(TargetConfig).validate_python(yaml.safe_load(spec))
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    target = build_target(cfg, files=TargetFiles(base / run_id), run_id=run_id, base_dir=base)
    target.start()
    try:
        ready_s = target.wait_ready().ready_after_s or 0.0
    finally:
        t0 = time.monotonic()
        target.stop()
        stop_s = time.monotonic() - t0
        cleanup_stale(run_id)
    return ready_s, stop_s


def cli_docker_pdns() -> float:
    """The hand-made reference: docker run -d, then dig until pdns answers."""
    port = free_port()
    name = f"soak-bench-{uuid.uuid4().hex[:8]}"
    t0 = time.monotonic()
    subprocess.run(
        [
            "docker",
            "run",
            "-d",
            "--init",
            "--name",
            name,
            "-p",
            f"127.0.0.1:{port}:5300/udp",
            "soak-test/pdns-auth",
        ],
        check=True,
        capture_output=True,
    )
    try:
        while not dns_query("127.0.0.1", port, "example.test.", "SOA", timeout_s=0.2).ok_transport:
            time.sleep(0.05)
        return time.monotonic() - t0
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s, min {min(values):.2f}, max {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", choices=sorted(SPECS), action="append")
    parser.add_argument("--smoke", action="store_true", help="one start of each: that it runs")
    args = parser.parse_args()
    if args.smoke:
        args.repeat = 1
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        templates(base)
        upstream_dir = base / "upstream"
        upstream_dir.mkdir()
        with dnsmasq_upstream(upstream_dir) as upstream:
            for kind in args.only or list(SPECS):
                runs = [one(kind, base, upstream.port) for _ in range(args.repeat)]
                print(
                    f"{kind:22s} ready: {summary([r for r, _ in runs])}; "
                    f"stop: {summary([s for _, s in runs])}"
                )
        if not args.only or "docker-pdns" in args.only:
            cli = [cli_docker_pdns() for _ in range(args.repeat)]
            print(f"{'docker CLI pdns (ref)':22s} ready: {summary(cli)}")


if __name__ == "__main__":
    main()
