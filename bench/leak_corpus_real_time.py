"""The real-time leak corpus's cases (bench/record_leak_corpus.py --real-time).

Every case is recorded in real time (time_scale 1): a cache fills at the pace of its
traffic's distinct names and TTLs, an allocator and a GC keep their own periods. Ticks
are 10 s, the warm-up is one default leak window (10 min), the steady part two hours
unless a case says otherwise; the load is 50 q/s, half of it names drawn with a Zipf
popularity from two million (answered by the upstream with a 1-h TTL: entries expire
while others arrive), the rest the cached/local/blocked classes.

Leak rates are chosen against the *default* thresholds per hour (5 MiB/h of RSS or heap,
10 goroutines/h, 1 fd/h), unscaled: 2x the RSS threshold is 2.84 KiB/s.

The corpus is split in two halves, fixed here and written into each fixture: the
detector's parameters are chosen on the tuning half only; the held-out half is scored
apart (bench/leak_accuracy.py --real-time). Each half holds leaks from the first query,
a leak after a flat part, caches that fill and servers that stay flat.
"""

from __future__ import annotations

import random
from pathlib import Path

from bench.leak_corpus_cases import (
    ALL,
    KRESD_CONF,
    NAMED_CONF,
    NAMED_ZONES,
    PROC,
    RECURSOR_CONF,
    UNBOUND_CONF,
    ZONE,
    Case,
    dnsmasq_target,
    flat,
    leak,
    process_target,
)
from tests.support.servers import named_recursive_conf

KiB = 1024
RSS_THRESHOLD_KIB_PER_S = 5 * 1024 / 3600  # the default 5 MiB/h
ZIPF_NAMES = 2_000_000
ZIPF_LINES = 400_000  # cycled: at 25 q/s of the class, once in 4.4 h
ZIPF_S = 1.05
ZIPF_ZONE = "zipf.example"
ONSET_S = 2400.0  # a leak after a flat part: 30 min into the steady part


def zipf_queries(path: Path, seed: int = 41) -> Path:
    """A dnsperf-format file of names drawn with a Zipf popularity (rank r has weight
    r^-s): a few names asked all the time, a long tail asked once; seeded, repeatable."""
    if path.exists():
        return path
    rng = random.Random(seed)
    weights = [r**-ZIPF_S for r in range(1, ZIPF_NAMES + 1)]
    ranks = rng.choices(range(ZIPF_NAMES), weights=weights, k=ZIPF_LINES)
    path.write_text("".join(f"n{r}.{ZIPF_ZONE} A\n" for r in ranks))
    return path


def rss_leak(times_threshold: float, onset_s: float = 0.0) -> list[str]:
    kib_per_s = RSS_THRESHOLD_KIB_PER_S * times_threshold
    return ["-shape=leak", f"-shape-kib-per-s={kib_per_s:.4f}", f"-shape-onset={onset_s:g}s"]


def leak_labels(times_threshold: float, onset_s: float = 0.0) -> dict[str, object]:
    rate = RSS_THRESHOLD_KIB_PER_S * times_threshold * KiB
    return {
        **leak(rate, onset_s, "rss_anon_bytes", "heap_inuse_bytes"),
        **flat("fds", "goroutines", "threads"),
    }


# pdns-recursor's webserver gives /metrics (no key needed): its cache beside its RSS
# (cache-bytes is left out of the web's stats unless stats-api-disabled-list says less).
RECURSOR_WEB = """webserver=yes
webserver-address=127.0.0.1
webserver-port={port.api}
webserver-allow-from=127.0.0.0/8
stats-api-disabled-list=
"""
RECURSOR_PROM = {
    "cache_entries": "pdns_recursor_cache_entries",
    "cache_bytes": "pdns_recursor_cache_bytes",
    "server_queries": "pdns_recursor_questions",
}
REFDNS_ACCOUNTING = {
    "cache_entries": "refdns_cache_entries",
    "server_queries": "sum(refdns_queries_total)",
}

# unbound's own accounting through unbound-control (the recorder polls it every tick).
# extended-statistics: mem.cache.* and the caches' counts are given only with it.
UNBOUND_BIG = (
    UNBOUND_CONF.replace("msg-cache-size: 4m", "extended-statistics: yes\n    msg-cache-size: 256m")
    .replace("rrset-cache-size: 8m", "rrset-cache-size: 512m")
    .replace(
        "remote-control:\n    control-enable: no\n",
        'remote-control:\n    control-enable: yes\n    control-interface: "{control}"\n'
        "    control-use-cert: no\n",
    )
)


def _recursor(entries: int) -> dict[str, object]:
    target = process_target(
        "pdns-recursor",
        ["pdns_recursor", "--config-dir={run_dir}"],
        RECURSOR_CONF.replace("{entries}", str(entries)) + RECURSOR_WEB,
        "recursor.conf",
    )
    return {**target, "ports": {"dns": {"protocol": "both"}, "api": {}}}


# knot-resolver's cache use and entries as stats, so its http module's /metrics gives them
# (cache.stats().usage_percent of the cache's size; cache.count() its entries).
KRESD_ACCOUNTING = """modules.load('http')
http.config({{ tls = false }})
net.listen('127.0.0.1', {{port.api}}, {{ kind = 'webmgmt' }})
event.recurrent(5 * sec, function()
    stats['acct.cache_bytes'] = cache.stats().usage_percent / 100 * {size_mb} * 1048576
    stats['acct.cache_entries'] = cache.count()
end)
"""
KRESD_PROM = {
    "cache_bytes": "acct_cache_bytes",
    "cache_entries": "acct_cache_entries",
    "server_queries": "request_total",
}


def _kresd(size_mb: int, accounting: bool = False) -> dict[str, object]:
    conf = KRESD_CONF.replace("4 * MB", f"{size_mb} * MB")
    if accounting:
        conf += KRESD_ACCOUNTING.format(size_mb=size_mb)
    target = process_target(
        "kresd",
        ["kresd", "-n", "-q", "-c", "{run_dir}/kresd.conf", "{data_dir}"],
        conf,
        "kresd.conf",
    )
    if accounting:
        target["ports"] = {"dns": {"protocol": "both"}, "api": {}}
    return target


def _named(conf: str) -> dict[str, object]:
    """named with its config; an authoritative one also with the zone files it names."""
    target = process_target(
        "named", ["named", "-g", "-n", "1", "-c", "{run_dir}/named.conf"], conf, "named.conf"
    )
    if "type primary" in conf:
        target["files"] = [{"dest": "named.conf", "content": conf}, *ZONE_FILES]
    return target


ZONE_FILES = [{"dest": f"{z}.zone", "content": ZONE} for z in NAMED_ZONES]

# PowerDNS Authoritative with its sqlite backend (Debian's), serving the same zones as named.
PDNS_AUTH_CONF = """launch=gsqlite3
gsqlite3-database={data_dir}/pdns.sqlite3
local-address=127.0.0.1
local-port={port.dns}
daemon=no
guardian=no
socket-dir={run_dir}
setuid=
setgid=
loglevel=3
"""
PDNS_SCHEMA = "/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql"
PDNS_ZONE_SQL = "".join(
    f"INSERT INTO domains (name, type) VALUES ('{z}', 'NATIVE');\n"
    f"INSERT INTO records (domain_id, name, type, content, ttl) SELECT id, '{z}', 'SOA', "
    f"'ns.invalid. hostmaster.invalid. 1 3600 600 86400 3600', 3600 FROM domains "
    f"WHERE name = '{z}';\n"
    + "".join(
        f"INSERT INTO records (domain_id, name, type, content, ttl) SELECT id, '{n}', '{t}', "
        f"'{c}', 3600 FROM domains WHERE name = '{z}';\n"
        for n, t, c in (
            (z, "NS", "ns.invalid."),
            (z, "A", "192.0.2.1"),
            (f"*.{z}", "A", "192.0.2.1"),
        )
    )
    for z in NAMED_ZONES
)


def _pdns_auth() -> dict[str, object]:
    db = "{data_dir}/pdns.sqlite3"
    shell = (
        f"rm -f {db} && sqlite3 {db} < {PDNS_SCHEMA} && sqlite3 {db} < {{run_dir}}/zone.sql "
        "&& exec pdns_server --config-dir={run_dir}"
    )
    target = process_target("pdns-auth", ["sh", "-c", shell], PDNS_AUTH_CONF, "pdns.conf")
    target["files"] = [
        {"dest": "pdns.conf", "content": PDNS_AUTH_CONF},
        {"dest": "zone.sql", "content": PDNS_ZONE_SQL},
    ]
    return target


DNSMASQ = dnsmasq_target(cache_size=10_000)


def count_leak(
    resource: str, per_h: float, others: tuple[str, str], half: str, suffix: str = ""
) -> Case:
    """refdns leaking goroutines or fds from the first query at per_h an hour (suffix: a
    second recording of the same leak, for the other half)."""
    per_s = per_h / 3600
    shape = "goroutines" if resource == "goroutines" else "fds"
    return Case(
        f"rt-refdns-{'fd' if shape == 'fds' else 'goroutine'}-leak-{per_h:g}-per-h{suffix}",
        [f"-shape={shape}", f"-shape-per-s={per_s:.6f}"],
        {**leak(per_s, 0.0, resource), **flat(*others)},  # type: ignore[arg-type]
        half=half,
    )


CACHE = {**flat("rss_anon_bytes", shape="cache-fill"), **flat("fds", "threads")}

CASES = [
    # --- tuning half ---
    Case("rt-refdns-flat", [], flat(*ALL), half="tuning"),
    Case("rt-refdns-leak-2x", rss_leak(2), leak_labels(2), half="tuning"),  # type: ignore[arg-type]
    Case(
        "rt-refdns-leak-1000x",
        rss_leak(1000),
        leak_labels(1000),  # type: ignore[arg-type]
        half="tuning",
        steady_s=1800.0,  # 5 GiB/h: half an hour is 2.5 GiB
    ),
    Case(
        "rt-refdns-leak-10x-onset", rss_leak(10, ONSET_S), leak_labels(10, ONSET_S), half="tuning"
    ),  # type: ignore[arg-type]
    Case(
        "rt-refdns-fd-leak",
        ["-shape=fds", "-shape-per-s=0.00111"],  # 4 fds/h: 4x the threshold, from the start
        {**leak(0.00111, 0.0, "fds"), **flat("goroutines", "threads")},
        half="tuning",
    ),
    Case(
        "rt-unbound-cache",
        [],
        {**CACHE},
        zipf_weight=9,
        accounting="unbound",
        half="tuning",
        target=process_target(
            "unbound",
            ["unbound", "-d", "-c", "{run_dir}/unbound.conf"],
            UNBOUND_BIG,
            "unbound.conf",
        ),
    ),
    Case(
        "rt-pdns-recursor-cache",
        [],
        {**CACHE},
        zipf_weight=9,
        half="tuning",
        target=_recursor(1_000_000),
        prom=RECURSOR_PROM,
    ),
    Case(
        "rt-bind9-auth",
        [],
        {**flat("rss_anon_bytes", shape="startup"), **flat("fds", "threads")},
        half="tuning",
        target=_named(NAMED_CONF),
    ),
    count_leak("goroutines", 20, ("fds", "threads"), "tuning"),  # 2x
    count_leak("fds", 10, ("goroutines", "threads"), "tuning"),  # 10x
    Case("rt-refdns-leak-5x", rss_leak(5), leak_labels(5), half="tuning"),  # type: ignore[arg-type]
    Case(
        "rt-dnsmasq-flat",
        [],
        flat("rss_anon_bytes", "fds", "threads"),  # its whole cache allocated at start
        zipf_weight=9,
        half="tuning",
        target=DNSMASQ,
    ),
    # Added later, so the tuning half holds what the held-out half asks of it: caches of
    # servers that account for their cache only through these (a smaller size, another
    # share of Zipf names than the held-out ones), and leaks at the held-out half's slowest
    # rates (fds at 1/h and 2/h, RSS at 1x).
    Case(
        "rt-knot-resolver-cache-128m",
        [],
        {**CACHE},
        zipf_weight=12,
        half="tuning",
        target=_kresd(128, accounting=True),
        prom=KRESD_PROM,
    ),
    Case(
        "rt-bind9-recursive-128m",
        [],
        {**CACHE},
        zipf_weight=12,
        accounting="bind",
        half="tuning",
        # Its statistics channel on a port the recorder picks: the cache's memory and nodes.
        target=_named(named_recursive_conf("128m", stats_port="{stats_port}")),
    ),
    count_leak("fds", 1, ("goroutines", "threads"), "tuning"),  # 1x
    count_leak("fds", 2, ("goroutines", "threads"), "tuning", suffix="-tuning"),  # 2x
    Case("rt-refdns-leak-1x-tuning", rss_leak(1), leak_labels(1), half="tuning"),  # type: ignore[arg-type]
    # --- held-out half ---
    Case(
        "rt-refdns-cache",
        ["-cache-entries=200000"],
        {
            **flat("rss_anon_bytes", "heap_inuse_bytes", shape="cache-fill"),
            **flat("fds", "goroutines", "threads"),
        },
        zipf_weight=9,
        half="held-out",
    ),
    Case("rt-refdns-leak-1x", rss_leak(1), leak_labels(1), half="held-out"),  # type: ignore[arg-type]
    Case("rt-refdns-leak-10x", rss_leak(10), leak_labels(10), half="held-out"),  # type: ignore[arg-type]
    Case(
        "rt-refdns-goroutine-leak",
        ["-shape=goroutines", "-shape-per-s=0.0111"],  # 40/h: 4x the threshold, from the start
        {**leak(0.0111, 0.0, "goroutines"), **flat("fds", "threads")},
        half="held-out",
    ),
    Case(
        "rt-knot-resolver-cache",
        [],
        {**CACHE},
        zipf_weight=9,
        half="held-out",
        target=_kresd(256),
    ),
    Case(
        "rt-bind9-recursive",
        [],
        {**CACHE},
        zipf_weight=9,
        half="held-out",
        target=_named(named_recursive_conf("256m")),
    ),
    Case(
        "rt-pdns-recursor-small",
        [],
        {**flat("rss_anon_bytes", shape="cache-cap"), **flat("fds", "threads")},
        zipf_weight=9,
        half="held-out",
        target=_recursor(20_000),
        prom=RECURSOR_PROM,
    ),
    count_leak("fds", 2, ("goroutines", "threads"), "held-out"),  # 2x
    count_leak("goroutines", 100, ("fds", "threads"), "held-out"),  # 10x
    Case("rt-refdns-leak-3x", rss_leak(3), leak_labels(3), half="held-out"),  # type: ignore[arg-type]
    Case(
        "rt-pdns-auth-flat",
        [],
        {**flat("rss_anon_bytes", shape="startup"), **flat("fds", "threads")},
        half="held-out",
        target=_pdns_auth(),
    ),
    # Added later, so the held-out half holds a case of each goal: a leak of 1000x from the
    # first query, and one after a flat part (another rate than the tuning half's).
    Case(
        "rt-refdns-leak-1000x-held-out",
        rss_leak(1000),
        leak_labels(1000),  # type: ignore[arg-type]
        half="held-out",
        steady_s=1800.0,
    ),
    Case("rt-refdns-leak-5x-onset", rss_leak(5, ONSET_S), leak_labels(5, ONSET_S), half="held-out"),  # type: ignore[arg-type]
]
PROC_ONLY = PROC
