"""The stretched leak corpus's cases and the server targets both corpora record
(bench/record_leak_corpus.py records them; bench/leak_corpus_real_time.py builds the
real-time cases from the same targets).

A case is a server (testbed/refdns with a `-shape`, or a real server's process target)
and the label of what each of its resources does: flat, or leaking at a rate from an
onset. The stretched cases run at time scale 60 (a recorded second stands for a minute).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.support.leakcorpus import Label

TIME_SCALE = 60.0
KiB = 1024
MiB = 1024**2


@dataclass(frozen=True)
class Case:
    name: str
    args: list[str]  # refdns flags beyond listen addresses, data and upstream
    labels: dict[str, Label]
    miss_weight: int = 0  # unique names a second share of the mix: the answer cache fills
    env: dict[str, str] = field(default_factory=dict)
    target: dict[str, object] | None = None  # a real server; None: testbed/refdns
    # The real-time corpus (bench/leak_corpus_real_time.py) only:
    half: str | None = None  # "tuning" or "held-out"
    steady_s: float | None = None  # longer or shorter than --steady-s
    zipf_weight: int = 0  # names of a Zipf popularity, of 18 (the cache fills and expires)
    # "unbound": unbound-control stats polled every tick; "bind": its statistics channel
    # (JSON) on a port the recorder picks (`{stats_port}` in the target's config)
    accounting: str | None = None
    prom: dict[str, str] | None = None  # a real server's /metrics on its `api` port


@dataclass(frozen=True)
class Mode:
    """How a corpus is recorded: the stretched one (minutes read as hours) or real time."""

    tick_s: float
    time_scale: float
    rate_qps: int
    real_time: bool


STRETCHED = Mode(tick_s=1.0, time_scale=TIME_SCALE, rate_qps=200, real_time=False)


def dnsmasq_argv(pid_file: str, *options: str) -> list[str]:
    """dnsmasq in the foreground on the service's DNS port of 127.0.0.1 only, reading no
    resolv.conf and no hosts file, `options` its own (the upstream's answers, the target's
    cache and server), its pid in `pid_file` (under {data_dir}: one per service)."""
    return [
        "dnsmasq",
        "--no-daemon",
        "--port={port.dns}",
        "--listen-address=127.0.0.1",
        "--bind-interfaces",
        "--no-resolv",
        "--no-hosts",
        *options,
        f"--pid-file={pid_file}",
        "--user=root",
    ]


def dnsmasq_target(cache_size: int) -> dict[str, object]:
    """dnsmasq as the target, forwarding to the upstream service, its cache `cache_size`
    entries (allocated whole at start: its RSS is flat while the cache fills)."""
    return {
        "runtime": "process",
        "name": "dnsmasq",
        "version": "debian",
        "argv": dnsmasq_argv(
            "{data_dir}/dnsmasq-target.pid",
            f"--cache-size={cache_size}",
            "--server=127.0.0.1#{service.upstream.port.dns}",
        ),
        "ports": {"dns": {"protocol": "both"}},
        "ready": {
            "probes": [{"kind": "dns", "name": "www.example.com", "answer": "192.0.2.1"}],
            "timeout_s": "20s",
        },
        "on_exit": "fail",
    }


REAL_TIME_MODE = Mode(tick_s=10.0, time_scale=1.0, rate_qps=50, real_time=True)


def flat(*resources: str, shape: str = "flat") -> dict[str, Label]:
    return {r: Label("healthy", shape) for r in resources}


def leak(rate_per_s: float, onset_s: float, *resources: str) -> dict[str, Label]:
    """A Go process's RSS grows by more than what it holds (the GC's headroom is
    proportional to the live heap): its rate is a lower bound (Label.rate_exact)."""
    return {
        r: Label("leak", "linear", rate_per_s, onset_s, rate_exact=r != "rss_anon_bytes")
        for r in resources
    }


ALL = ("rss_anon_bytes", "heap_inuse_bytes", "fds", "goroutines", "threads")
ONSET_S = 120.0  # a minute into the judged part (after the 60-s warm-up): flat first

# At scale 60 the default thresholds are, per recorded second: 5 MiB/h -> 85.3 KiB/s,
# 10 goroutines/h -> 0.167/s, 1 fd/h -> 0.0167/s.
CASES = [
    Case("refdns-flat", [], flat(*ALL)),
    Case(
        "refdns-startup",
        ["-shape=startup", "-shape-mib=48", "-shape-for=100s"],
        {
            **flat("rss_anon_bytes", "heap_inuse_bytes", shape="startup"),
            **flat("fds", "goroutines", "threads"),
        },
    ),
    # Decelerating: 96 MiB x (1 - e^(-t / 150 s)) held: 32 MiB at the warm-up's end, rising
    # at 5.2 x the threshold then, 1.05 x at 300 s and 0.7 x at the end. GOGC=5: a GC every
    # few seconds, so the window minima follow what is held (at the default 100 the teeth
    # are a minute long, longer than a window, and RSS follows their peaks: a staircase).
    Case(
        "refdns-settle",
        ["-shape=settle", "-shape-mib=96", "-shape-for=150s"],
        {
            **flat("rss_anon_bytes", "heap_inuse_bytes", shape="settle"),
            **flat("fds", "goroutines", "threads"),
        },
        env={"GOGC": "5"},
    ),
    Case(
        "refdns-cache-cap",
        ["-cache-entries=25000"],  # fills for minutes after the warm-up: a hard case
        {
            **flat("rss_anon_bytes", "heap_inuse_bytes", shape="cache-fill-past-warmup"),
            **flat("fds", "goroutines", "threads"),
        },
        miss_weight=9,
    ),
    Case(
        "refdns-cache-small",
        ["-cache-entries=4000"],
        {
            **flat("rss_anon_bytes", "heap_inuse_bytes", shape="cache-cap"),
            **flat("fds", "goroutines", "threads"),
        },
        miss_weight=9,
    ),
    Case(
        "refdns-leak-below",
        ["-shape=leak", "-shape-kib-per-s=40", f"-shape-onset={ONSET_S:g}s"],
        {
            **leak(40 * KiB, ONSET_S, "rss_anon_bytes", "heap_inuse_bytes"),
            **flat("fds", "goroutines", "threads"),
        },
    ),
    Case(
        "refdns-leak-above",
        ["-shape=leak", "-shape-kib-per-s=136", f"-shape-onset={ONSET_S:g}s"],
        {
            **leak(136 * KiB, ONSET_S, "rss_anon_bytes", "heap_inuse_bytes"),
            **flat("fds", "threads"),
        },
    ),
    Case(
        "refdns-goroutine-leak",
        ["-shape=goroutines", "-shape-per-s=0.5", f"-shape-onset={ONSET_S:g}s"],
        {**leak(0.5, ONSET_S, "goroutines"), **flat("fds", "threads")},
    ),
    Case(
        "refdns-fd-leak",
        ["-shape=fds", "-shape-per-s=0.05", f"-shape-onset={ONSET_S:g}s"],
        {**leak(0.05, ONSET_S, "fds"), **flat("goroutines", "threads")},
    ),
    Case(
        "refdns-sawtooth",
        ["-shape=sawtooth", "-shape-mib=32", "-shape-kib-per-s=8192"],
        {
            **flat("rss_anon_bytes", "heap_inuse_bytes", shape="sawtooth"),
            **flat("fds", "goroutines", "threads"),
        },
    ),
    Case(
        "refdns-batch",
        ["-shape=batch", "-shape-mib=64", "-shape-every=45s", "-shape-for=8s"],
        {
            **flat("rss_anon_bytes", "heap_inuse_bytes", shape="batch"),
            **flat("fds", "goroutines", "threads"),
        },
    ),
]


PROC = ("rss_anon_bytes", "fds", "threads")  # what /proc gives of a server without /metrics
UPSTREAM = "127.0.0.1@{service.upstream.port.dns}"


def process_target(name: str, argv: list[str], conf: str, conf_name: str) -> dict[str, object]:
    """A real server as a process on a port soak picks, its config written into the run."""
    return {
        "runtime": "process",
        "name": name,
        "version": "debian",
        "argv": argv,
        "ports": {"dns": {"protocol": "both"}},
        "files": [{"dest": conf_name, "content": conf}],
        "ready": {
            "probes": [{"kind": "dns", "name": "www.example.com", "answer": "192.0.2.1"}],
            "timeout_s": "20s",
        },
        "on_exit": "fail",
    }


UNBOUND_CONF = """server:
    do-daemonize: no
    username: ""
    chroot: ""
    directory: ""
    pidfile: ""
    use-syslog: no
    logfile: ""
    verbosity: 0
    interface: 127.0.0.1@{port.dns}
    port: {port.dns}
    num-threads: 1
    do-ip6: no
    access-control: 127.0.0.0/8 allow
    do-not-query-localhost: no
    msg-cache-size: 4m
    rrset-cache-size: 8m
forward-zone:
    name: "."
    forward-addr: 127.0.0.1@{service.upstream.port.dns}
remote-control:
    control-enable: no
"""

KRESD_CONF = """net.listen('127.0.0.1', {port.dns}, { kind = 'dns' })
net.ipv6 = false
cache.open(4 * MB, 'lmdb://{data_dir}/cache')
policy.add(policy.all(policy.STUB('127.0.0.1@{service.upstream.port.dns}')))
"""

RECURSOR_CONF = """local-address=127.0.0.1
local-port={port.dns}
forward-zones-recurse=.=127.0.0.1:{service.upstream.port.dns}
hint-file=no
security-poll-suffix=
dnssec=process-no-validate
daemon=no
write-pid=no
socket-dir={run_dir}
threads=1
quiet=yes
setuid=
setgid=
max-cache-entries={entries}
max-packetcache-entries={entries}
"""

REAL = [
    Case(
        "unbound-flat",
        [],
        flat(*PROC),
        target=process_target(
            "unbound",
            ["unbound", "-d", "-c", "{run_dir}/unbound.conf"],
            UNBOUND_CONF,
            "unbound.conf",
        ),
    ),
    Case(
        "knot-resolver-cache-cap",
        [],
        {**flat("rss_anon_bytes", shape="cache-cap"), **flat("fds", "threads")},
        miss_weight=9,
        target=process_target(
            "kresd",
            ["kresd", "-n", "-q", "-c", "{run_dir}/kresd.conf", "{data_dir}"],
            KRESD_CONF,
            "kresd.conf",
        ),
    ),
    # Fills for minutes after the warm-up (20,000 entries): a hard case.
    Case(
        "pdns-recursor-cache-cap",
        [],
        {**flat("rss_anon_bytes", shape="cache-fill-past-warmup"), **flat("fds", "threads")},
        miss_weight=9,
        target=process_target(
            "pdns-recursor",
            ["pdns_recursor", "--config-dir={run_dir}"],
            RECURSOR_CONF.replace("{entries}", "20000"),
            "recursor.conf",
        ),
    ),
    Case(
        "pdns-recursor-small-cache",
        [],
        {**flat("rss_anon_bytes", shape="cache-cap"), **flat("fds", "threads")},
        miss_weight=9,
        target=process_target(
            "pdns-recursor",
            ["pdns_recursor", "--config-dir={run_dir}"],
            RECURSOR_CONF.replace("{entries}", "3000"),
            "recursor.conf",
        ),
    ),
]
# Authoritative for the mix's zones (every name answered from the zone, the rest REFUSED):
# its memory grows at start (zone load, the first queries' buffers) and then stays flat.
NAMED_CONF = """options {
    directory "{data_dir}";
    pid-file none;
    session-keyfile "{data_dir}/session.key";
    listen-on port {port.dns} { 127.0.0.1; };
    listen-on-v6 { none; };
    recursion no;
    notify no;
    dnssec-validation no;
};
controls { };
logging { category default { null; }; };
"""
NAMED_ZONES = ("example.com", "example.net", "example.org", "home.arpa", "blocked.example")
NAMED_CONF += "".join(
    f'zone "{z}" {{ type primary; file "{{run_dir}}/{z}.zone"; }};\n' for z in NAMED_ZONES
)
ZONE = """$TTL 3600
@ IN SOA ns.invalid. hostmaster.invalid. 1 3600 600 86400 3600
@ IN NS ns.invalid.
@ IN A 192.0.2.1
* IN A 192.0.2.1
"""

REAL.append(
    Case(
        "dnsmasq-cache-cap",
        [],
        # dnsmasq allocates its whole cache at start: the RSS is flat while it fills.
        flat("rss_anon_bytes", "fds", "threads"),
        miss_weight=9,
        target=dnsmasq_target(cache_size=5000),
    ),
)
REAL.append(
    Case(
        "bind9-auth",
        [],
        {**flat("rss_anon_bytes", shape="startup"), **flat("fds", "threads")},
        target={
            **process_target(
                "named",
                ["named", "-g", "-n", "1", "-c", "{run_dir}/named.conf"],
                NAMED_CONF,
                "named.conf",
            ),
            "files": [
                {"dest": "named.conf", "content": NAMED_CONF},
                *({"dest": f"{z}.zone", "content": ZONE} for z in NAMED_ZONES),
            ],
        },
    ),
)
CASES += REAL
