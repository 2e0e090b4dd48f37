"""The `dig` sampler: DNS probes against the target, one `dig` point per probe."""

from __future__ import annotations

from collections.abc import Callable

import dns.rcode

from soak.errors import InputError
from soak.points import Point, event_point
from soak.probes import DnsResult, dns_query
from soak.samplers.config import DigProbeConfig
from soak.targets.base import Running

NO_REPLY_RCODE = -1.0  # the `rcode` field when no reply came back


def probe_name(probe: DigProbeConfig) -> str:
    return f"{probe.name}/{probe.type.upper()}"


def probe_ok(probe: DigProbeConfig, result: DnsResult) -> bool:
    """A reply with the expected rcode and, if one is given, the expected answer among its RRs."""
    if not result.ok_transport or result.rcode != probe.rcode.upper():
        return False
    if probe.answer is None:
        return True
    want = probe.answer.strip().rstrip(".").lower()
    return any(a.strip().rstrip(".").lower() == want for a in result.answers)


class DigSampler:
    def __init__(
        self,
        probes: list[DigProbeConfig],
        target: Callable[[], Running | None],
        *,
        name: str = "dig",
    ) -> None:
        self.name = name
        for p in probes:
            try:
                dns.rcode.from_text(p.rcode)
            except dns.rcode.UnknownRcode as exc:
                raise InputError(
                    f"samplers.dig {probe_name(p)}: unknown rcode {p.rcode!r}"
                ) from exc
        self.probes = probes
        self.target = target

    def sample(self, tick_time_ns: int) -> list[Point]:
        running = self.target()
        if running is None:
            return []
        points = []
        for probe in self.probes:
            if probe.port not in running.ports:
                raise RuntimeError(f"{probe_name(probe)}: the target has no port {probe.port!r}")
            host, port = running.address(probe.port)
            result = dns_query(
                host,
                port,
                probe.name,
                probe.type,
                protocol=probe.protocol,
                timeout_s=probe.timeout_s,
            )
            rcode = (
                float(dns.rcode.from_text(result.rcode))
                if result.rcode is not None
                else NO_REPLY_RCODE
            )
            fields = {
                "latency_ms": result.latency_ms,
                "rcode": rcode,
                "ok": 1.0 if probe_ok(probe, result) else 0.0,
            }
            points.append(Point("dig", dict(fields), tick_time_ns, {"probe": probe_name(probe)}))
            if result.error is not None:
                message = f"{probe_name(probe)}: {result.error}"
                points.append(event_point("dig_error", message, tick_time_ns))
        return points
