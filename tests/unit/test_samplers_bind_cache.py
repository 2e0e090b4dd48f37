"""BIND's cache accounting from its statistics channel (soak.samplers.bind_cache)."""

from __future__ import annotations

from soak.samplers.bind_cache import bind_cache_fields
from soak.samplers.server import parse_bind_stats

# /json/v1/server as BIND 9.18 answers it, recursive with its default view (the sections
# that matter; numbers from a run filling its cache).
CACHESTATS = {
    "CacheHits": 0,
    "CacheMisses": 2,
    "CacheNodes": 1429,
    "TreeMemTotal": 524570,
    "TreeMemInUse": 512980,
    "HeapMemTotal": 37088,
    "HeapMemInUse": 37035,
}
DOC = {
    "json-stats-version": "1.7",
    "opcodes": {"QUERY": 4330, "UPDATE": 0},
    "views": {"_default": {"resolver": {"stats": {}, "cachestats": CACHESTATS, "cache": {}}}},
}


def test_the_views_cache_stats_are_its_cache_bytes_and_entries() -> None:
    assert bind_cache_fields(DOC) == {"cache_bytes": 512980 + 37035, "cache_entries": 1429}
    assert parse_bind_stats(DOC) == {
        "server_queries": 4330.0,
        "cache_bytes": 550015.0,
        "cache_entries": 1429.0,
    }


def test_views_are_summed_and_a_view_without_cache_stats_is_left_out() -> None:
    views = {
        "_default": {"resolver": {"cachestats": CACHESTATS}},
        "internal": {"resolver": {"cachestats": {**CACHESTATS, "CacheNodes": 1}}},
        "_bind": {"resolver": {"stats": {}}},
    }
    fields = bind_cache_fields({"views": views})
    assert fields == {"cache_bytes": 2 * 550015, "cache_entries": 1430}


def test_no_cache_stats_no_accounting() -> None:
    """An authoritative-only answer, or a malformed one: no cache figures (never zeros,
    which the leak analysis would read as a cache that stays flat)."""
    assert bind_cache_fields({"opcodes": {"QUERY": 3}}) == {}
    assert bind_cache_fields({"views": {"_default": {}}}) == {}
    bad = {"views": {"_default": {"resolver": {"cachestats": {"TreeMemInUse": True}}}}}
    assert bind_cache_fields(bad) == {}
    assert bind_cache_fields([]) == {}
    assert parse_bind_stats({"opcodes": {"QUERY": 3}}) == {"server_queries": 3.0}
