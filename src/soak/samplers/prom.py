"""The `prom` sampler: the target's own Prometheus metrics, mapped to `runtime` fields."""

from __future__ import annotations

import re

import httpx

from soak.errors import InputError
from soak.points import FieldValue, Point, event_point
from soak.probes import http_request
from soak.samplers.base import TargetFn, TargetSectionSampler
from soak.samplers.promexpr import Expr, map_samples, parse_expr, parse_samples
from soak.samplers.selection import PromSamplerConfig


class PromSampler(TargetSectionSampler[PromSamplerConfig]):
    name = "prom"

    def __init__(
        self, cfg: PromSamplerConfig, target: TargetFn, *, client: httpx.Client | None = None
    ) -> None:
        super().__init__(cfg, target)
        self.client = client
        self.exprs: dict[str, Expr] = {name: parse_expr(e) for name, e in cfg.map.items()}
        try:
            self.record = re.compile(cfg.record_regex) if cfg.record_regex else None
        except re.error as exc:
            raise InputError(f"samplers.prom.record_regex: {exc}") from exc

    def sample(self, tick_time_ns: int) -> list[Point]:
        running = self.target()
        if running is None:
            return []
        if self.cfg.port not in running.ports:
            raise RuntimeError(f"the target has no port named {self.cfg.port!r}")
        host, port = running.address(self.cfg.port)
        url = f"http://{_url_host(host)}:{port}{self.cfg.path}"
        result = http_request(
            "GET", url, headers=self.cfg.headers, timeout_s=self.cfg.timeout_s, client=self.client
        )
        if result.status != 200:
            raise RuntimeError(f"GET {url}: {result.error or f'HTTP {result.status}'}")
        samples = parse_samples(result.body.decode("utf-8", errors="replace"))
        fields, missing = map_samples(samples, self.exprs, self.record)
        points = []
        if fields:
            runtime: dict[str, FieldValue] = dict(fields)
            points.append(Point("runtime", runtime, tick_time_ns))
        if missing:
            message = "metrics matched nothing: " + ", ".join(sorted(missing))
            points.append(event_point("prom_missing", message, tick_time_ns, len(missing)))
        return points


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
