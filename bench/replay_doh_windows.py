"""The compiled DoH replay at a fixed rate, second by second: where its first second's
send offsets and latencies come from.

The capture of bench/replay_vs_dnsperf.py (100 clients in turn, the six queries of
DEFAULT_QUERIES) replayed over DoH at --rate q/s for --duration s by `Replay.run` in
this process (the compiled loop), against one unbound thread with DoT and DoH
listeners and its remote-control socket (tests/support/unbound_counts.py). Per run:
the connections' handshake times (connect to TLS and ALPN done, each client's
connection opening at its first query), what the server's HTTP/2 layer said (streams
reset, refused, retried; GOAWAYs), unbound's own count of the queries it was sent, and
per 1-s window: sent, completed, lost, the send offset (how late the loop handed each
query to its connection) and the latency (from that hand-over to the answer, a wait for
the connection's handshake included), p50 and p99.

    PYTHONPATH=src .venv/bin/python bench/replay_doh_windows.py [--runs 3] [--rate 10000]
    PYTHONPATH=src .venv/bin/python bench/replay_doh_windows.py --smoke   # seconds
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ["SOAK_REPLAY_ENGINE"] = "compiled"

from tests.support.tls import make_cert  # noqa: E402
from tests.support.unbound_counts import unbound_queries, unbound_with_control  # noqa: E402

from replay_vs_dnsperf import make_capture  # noqa: E402
from soak.load.ledger import Window  # noqa: E402
from soak.load.replay import Offsets, Replay  # noqa: E402
from soak.traffic.capture_file import read_capture  # noqa: E402
from soak.traffic.replay_config import ReplayConfig  # noqa: E402


def p50_p99_ms(counts: dict[int, int]) -> str:
    """ "p50 X p99 Y ms" of a {µs: n} count, quantiles as the replay's send offsets take
    them (Offsets.quantiles); "none" when empty."""
    if not counts:
        return "none"
    found = Offsets()
    found.counts.update(counts)
    q = found.quantiles()
    return f"p50 {q['p50'] / 1000:.2f} p99 {q['p99'] / 1000:.1f} ms"


def one_run(cap: Path, port: int, sock: Path, rate: float, duration_s: float) -> None:
    cfg = ReplayConfig(file=cap, transport="doh", rate_qps=rate)  # type: ignore[arg-type]
    replay = Replay(cfg, read_capture(cap), "127.0.0.1", port, 1.0)
    replay.offsets.by_second = {}  # each window's offsets kept, as a soak run's are
    windows: list[Window] = []
    replay.ledger.on_window = windows.append
    before = unbound_queries(sock)[0]
    d = replay.run(duration_s).as_dict()
    received = unbound_queries(sock)[0] - before
    load = Path("/proc/loadavg").read_text().split()[:3]
    c = d["connections"]
    print(
        f"load average {load}: sent {d['sent']}, completed {d['completed']}, lost {d['lost']}"
        f" (late {d['late']}), unbound received {received}; {c['opened']} connections,"
        f" handshake p50 {c['handshake_p50_us'] / 1000:.0f} p99 {c['handshake_p99_us'] / 1000:.0f}"
        f" max {c['handshake_max_us'] / 1000:.0f} ms, errors {c['errors']};"
        f" streams reset {c['streams_reset']}, refused {c['streams_refused']},"
        f" retried {c['streams_retried']}, GOAWAYs {c['goaways']}"
    )
    for w in sorted(windows, key=lambda w: w.second):
        t = w.total()
        off = replay.offsets.take(w.second).counts
        print(
            f"  second {w.second}: sent {t.sent} completed {t.completed} lost {t.lost};"
            f" offset {p50_p99_ms(off)}; latency {p50_p99_ms(t.lat_us)}"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=float, default=10_000)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny sizes: that it runs")
    args = ap.parse_args()
    clients, span_s = 100, 60.0
    if args.smoke:
        args.runs, args.rate, args.duration, clients, span_s = 1, 500.0, 1.0, 4, 2.0
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        cap, _ = make_capture(tmp, clients, span_s)
        with unbound_with_control(tmp, make_cert(tmp)) as (server, sock):
            for _ in range(args.runs):
                one_run(cap, server.port_for("doh"), sock, args.rate, args.duration)


if __name__ == "__main__":
    main()
