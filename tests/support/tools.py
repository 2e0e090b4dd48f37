"""Every program the tests run, and the Debian package that brings it.

scripts/install-system-deps.sh must install each package (tests/unit/test_tools_installed.py
checks it, and under CI=true that each program is on PATH): on a fresh machine a test whose
tool is missing fails; it is never skipped.
"""

from __future__ import annotations

# program -> Debian package
TOOLS: dict[str, str] = {
    "unbound": "unbound",
    "unbound-control": "unbound",
    "pdns_server": "pdns-server",
    "pdns_recursor": "pdns-recursor",
    "kresd": "knot-resolver",
    "named": "bind9",
    "dnsdist": "dnsdist",
    "dnsmasq": "dnsmasq-base",
    "dnsperf": "dnsperf",
    "dig": "bind9-dnsutils",
    "sqlite3": "sqlite3",
    "openssl": "openssl",
    "tcpdump": "tcpdump",
    "docker": "docker.io",
    "dockerd": "docker.io",
    "docker-compose": "docker-compose",
    "mmdebstrap": "mmdebstrap",
    "influxd": "influxdb",
    "victoria-metrics": "victoria-metrics",
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "prometheus-alertmanager": "prometheus-alertmanager",
    "chromium": "chromium",
    "go": "golang-go",
    "gcc": "gcc",
    "pgrep": "procps",
    "ip": "iproute2",
}

# What every Debian machine has (coreutils, util-linux, bash, dash): not installed by the project.
BASE_SYSTEM = frozenset(
    {"sh", "bash", "true", "false", "yes", "sleep", "dd", "umount", "mount", "kill", "prlimit"}
)

# Names the tests look up on purpose to see them missing.
MISSING_ON_PURPOSE = frozenset({"no-such-dns-server"})

# Programs looked up under another name, in the package of the one named here.
ALIASES = {"chromium-browser": "chromium"}
