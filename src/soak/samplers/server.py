"""The `server` sampler: what the server says of itself, beside what /proc says of it.

unbound answers its remote-control socket (`remote-control: control-enable: yes`, a
`control-interface` socket path, `control-use-cert: no`, and `extended-statistics: yes`
for the cache figures) with `stats_noreset`, spoken directly ("UBCT1 <command>\\n", as
unbound-control does): the queries it received (`total.num.queries`), the bytes its
message and RRset caches hold and their entries. They become `runtime` fields:
`server_queries`, `cache_bytes`, `cache_entries`: the leak analysis's accounting
(soak.analysis.accounting) and the audit's count of the queries the server received.

BIND (`kind: bind`) answers its statistics channel (`statistics-channels { inet
127.0.0.1 port N; };`) with JSON at /json/v1/server: `opcodes.QUERY`, the queries it
received, is `server_queries`; its views' cache stats are `cache_bytes` and
`cache_entries` (soak.samplers.bind_cache).

PowerDNS Authoritative (`kind: pdns`) answers its HTTP API (`api=yes`, `webserver=yes`)
at /api/v1/servers/localhost/statistics, `headers` carrying its X-API-Key: a list of
{name, type, value}. Its `udp-queries` ("number of UDP queries received") plus
`tcp-queries` ("number of TCP queries received"), both counted as each query is read,
before the packet cache, are `server_queries`.

Servers with Prometheus metrics (pdns-recursor, refdns, knot-resolver) give the same
fields through the `prom` sampler's map; this one is for those without.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx

from soak.placeholders import reveal_map
from soak.points import FieldValue, Point
from soak.samplers.base import TargetFn, TargetSectionSampler
from soak.samplers.bind_cache import bind_cache_fields
from soak.samplers.selection import ServerSamplerConfig

_CONTROL_VERSION = b"UBCT1 "
_MAX_REPLY_BYTES = 4 * 1024 * 1024


def parse_unbound_stats(text: str) -> dict[str, FieldValue]:
    """`name=value` lines of `unbound-control stats_noreset` -> the server's own figures
    (each only when every line it needs is there)."""
    stats: dict[str, float] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep:
            try:
                stats[name.strip()] = float(value)
            except ValueError:
                continue  # a histogram label or text: not a figure
    fields: dict[str, FieldValue] = {}
    if "total.num.queries" in stats:
        fields["server_queries"] = stats["total.num.queries"]
    if {"mem.cache.rrset", "mem.cache.message"} <= stats.keys():
        fields["cache_bytes"] = stats["mem.cache.rrset"] + stats["mem.cache.message"]
    if {"msg.cache.count", "rrset.cache.count"} <= stats.keys():
        fields["cache_entries"] = stats["msg.cache.count"] + stats["rrset.cache.count"]
    return fields


def parse_bind_stats(doc: Any) -> dict[str, FieldValue]:
    """BIND's /json/v1/server -> `server_queries` (its `opcodes.QUERY`: the queries it
    received; notifies and updates are other opcodes), when it is there, and its cache's
    own accounting where a view reports one."""
    opcodes = doc.get("opcodes") if isinstance(doc, dict) else None
    queries = opcodes.get("QUERY") if isinstance(opcodes, dict) else None
    if isinstance(queries, int | float) and not isinstance(queries, bool):
        return {"server_queries": float(queries), **bind_cache_fields(doc)}
    return {}


_PDNS_QUERIES = ("udp-queries", "tcp-queries")


def parse_pdns_stats(doc: Any) -> dict[str, FieldValue]:
    """pdns_server's /api/v1/servers/localhost/statistics -> `server_queries` (its
    `udp-queries` plus `tcp-queries`), when both are there."""
    values: dict[str, float] = {}
    for item in doc if isinstance(doc, list) else []:
        if isinstance(item, dict) and item.get("name") in _PDNS_QUERIES:
            try:
                values[item["name"]] = float(item.get("value", ""))
            except ValueError:
                continue
    if len(values) < len(_PDNS_QUERIES):
        return {}
    return {"server_queries": sum(values.values())}


def http_json(
    host: str, port: int, path: str, timeout_s: float, headers: dict[str, str] | None = None
) -> Any:
    """GET http://host:port/path as JSON (BIND's statistics channel, pdns's API)."""
    host = f"[{host}]" if ":" in host else host
    reply = httpx.get(f"http://{host}:{port}{path}", timeout=timeout_s, headers=headers)
    reply.raise_for_status()
    return json.loads(reply.text)


# kind -> (its path, its parser, what it must have)
_HTTP_KINDS = {
    "bind": ("/json/v1/server", parse_bind_stats, "no opcodes.QUERY"),
    "pdns": ("/api/v1/servers/localhost/statistics", parse_pdns_stats, "no udp-/tcp-queries"),
}


def unbound_control(socket_path: Path, command: str, timeout_s: float) -> str:
    """One remote-control command over unbound's unix socket (no TLS); its whole reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(str(socket_path))
        s.sendall(_CONTROL_VERSION + command.encode() + b"\n")
        chunks: list[bytes] = []
        size = 0
        while size < _MAX_REPLY_BYTES:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    reply = b"".join(chunks).decode("utf-8", errors="replace")
    if reply.startswith("error"):
        raise RuntimeError(f"unbound remote control: {reply.strip()}")
    return reply


class ServerSampler(TargetSectionSampler[ServerSamplerConfig]):
    name = "server"

    def __init__(
        self, cfg: ServerSamplerConfig, target: TargetFn, base_dir: Path | None = None
    ) -> None:
        super().__init__(cfg, target)
        # its secrets ({env.NAME}, {file:PATH}) read once, kept in memory only
        self.headers = reveal_map(cfg.headers, base_dir, "samplers.server.headers")

    def socket_path(self, run_dir: Path | None) -> Path:
        path = Path(self.cfg.control_socket)
        if path.is_absolute() or run_dir is None:
            return path
        return run_dir / path

    def sample(self, tick_time_ns: int) -> list[Point]:
        running = self.target()
        if running is None:
            return []
        cfg = self.cfg
        if cfg.kind in _HTTP_KINDS:
            url_path, parse, needs = _HTTP_KINDS[cfg.kind]
            if cfg.port not in running.ports:
                raise RuntimeError(f"{cfg.kind} statistics: the target has no port {cfg.port!r}")
            host, port = running.address(cfg.port)
            fields = parse(http_json(host, port, url_path, cfg.timeout_s, self.headers))
            if not fields:
                raise RuntimeError(f"{cfg.kind} statistics on port {port}: {needs}")
            return [Point("runtime", fields, tick_time_ns)]
        path = self.socket_path(running.run_dir)
        reply = unbound_control(path, "stats_noreset", self.cfg.timeout_s)
        fields = parse_unbound_stats(reply)
        if not fields:
            raise RuntimeError(f"{path}: stats_noreset gave no queries or cache figures")
        return [Point("runtime", fields, tick_time_ns)]
