"""BIND's cache as BIND accounts for it, from the statistics channel's /json/v1/server.

Each view's resolver reports `cachestats`: the bytes its cache database holds
(`TreeMemInUse`, the names and their rdata, plus `HeapMemInUse`, the heap that orders
them for expiry) and its nodes (`CacheNodes`). Summed over the views they are the
server's own accounting (`cache_bytes`, `cache_entries`) that the leak analysis sets
beside its RSS (soak.analysis.accounting): memory that grows while this grows is a
cache filling, memory that grows while it stays flat is not.
"""

from __future__ import annotations

from typing import Any

from soak.points import FieldValue

_BYTES = ("TreeMemInUse", "HeapMemInUse")
_ENTRIES = "CacheNodes"


def bind_cache_fields(doc: Any) -> dict[str, FieldValue]:
    """`cache_bytes` and `cache_entries` summed over the views that report them; none
    when no view does (an authoritative-only server has no resolver cache stats)."""
    views = doc.get("views") if isinstance(doc, dict) else None
    if not isinstance(views, dict):
        return {}
    cache_bytes = cache_entries = 0.0
    seen = False
    for view in views.values():
        resolver = view.get("resolver") if isinstance(view, dict) else None
        stats = resolver.get("cachestats") if isinstance(resolver, dict) else None
        if not isinstance(stats, dict) or not all(_number(stats.get(k)) for k in _BYTES):
            continue
        seen = True
        cache_bytes += sum(float(stats[k]) for k in _BYTES)
        if _number(stats.get(_ENTRIES)):
            cache_entries += float(stats[_ENTRIES])
    return {"cache_bytes": cache_bytes, "cache_entries": cache_entries} if seen else {}


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
