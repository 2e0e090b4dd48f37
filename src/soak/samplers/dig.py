"""The `dig` sampler: DNS probes against the target, one `dig` point per probe."""

from __future__ import annotations

from collections.abc import Callable

import dns.rcode

from soak.errors import InputError
from soak.points import Point, event_point
from soak.probes import DnsResult, dns_query
from soak.samplers.base import ItemsSampler
from soak.samplers.selection import DigProbeConfig
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


class DigSampler(ItemsSampler[DigProbeConfig]):
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
        self.items = probes
        self.target = target

    def ask(self, running: Running, item: DigProbeConfig, tick_time_ns: int) -> list[Point]:
        name = probe_name(item)
        if item.port not in running.ports:
            raise RuntimeError(f"{name}: the target has no port {item.port!r}")
        host, port = running.address(item.port)
        result = dns_query(
            host, port, item.name, item.type, protocol=item.protocol, timeout_s=item.timeout_s
        )
        rcode = (
            float(dns.rcode.from_text(result.rcode)) if result.rcode is not None else NO_REPLY_RCODE
        )
        fields = {
            "latency_ms": result.latency_ms,
            "rcode": rcode,
            "ok": 1.0 if probe_ok(item, result) else 0.0,
        }
        points = [Point("dig", dict(fields), tick_time_ns, {"probe": name})]
        if result.error is not None:
            points.append(event_point("dig_error", f"{name}: {result.error}", tick_time_ns))
        return points
