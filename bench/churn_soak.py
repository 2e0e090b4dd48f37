"""Connection churn against a DoT/DoH server: do the server's file descriptors stay flat?

Starts unbound (one thread) with DoT and DoH on loopback and a throwaway
certificate, and runs the load engine for --minutes with every connection
carrying --per-conn queries then idling --idle-s (so connections open and
close at rate / per-conn a second), --hangup-fraction of them resetting
right after their last query instead (answers still due), over --protocol.
Every --every-s it prints the server's open fds (/proc/PID/fd), its RSS and
the load window's connections opened, connection errors and lost queries;
at the end, the first and last fd counts and the run's totals.

    .venv/bin/python bench/churn_soak.py [--minutes 10] [--rate 1000] [--per-conn 20]
        [--idle-s 0.2] [--every-s 30] [--protocol tcp|dot|doh] [--hangup-fraction 0]
    .venv/bin/python bench/churn_soak.py --smoke        # seconds: that it still runs
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.servers import unbound  # noqa: E402
from tests.support.tls import make_cert  # noqa: E402

from soak.load.generator import LoadRunner  # noqa: E402
from soak.load.load_config import LoadConfig  # noqa: E402


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--per-conn", type=int, default=20)
    ap.add_argument("--idle-s", type=float, default=0.2)
    ap.add_argument("--every-s", type=float, default=30.0)
    ap.add_argument("--protocol", default="dot", choices=["tcp", "dot", "doh"])
    ap.add_argument("--hangup-fraction", type=float, default=0.0)
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny sizes: that it runs")
    args = ap.parse_args()
    if args.smoke:
        args.minutes, args.rate, args.every_s = 0.05, 200.0, 1.0
    mix = [
        {
            "name": "clients",
            "queries": ["www.example.test A", "mail.example.test A", "example.test MX"],
            "connection": {
                "queries_per_connection": args.per_conn,
                "idle_s": args.idle_s,
                "hangup_fraction": args.hangup_fraction,
            },
        }
    ]
    cfg = LoadConfig(protocol=args.protocol, flows=8, mix=mix)
    duration_s = args.minutes * 60
    with tempfile.TemporaryDirectory(prefix="soak-churn-") as tmp:
        cert = make_cert(Path(tmp))
        with unbound(Path(tmp), tls=cert) as server:
            port = server.port_for(args.protocol)
            runner = LoadRunner(cfg, ("127.0.0.1", port), base_dir=Path(tmp))
            print(
                f"unbound {args.protocol} on 127.0.0.1:{port}: {args.rate:g} q/s, "
                f"{args.per_conn} queries per connection, idle {args.idle_s:g} s, "
                f"hang-ups {args.hangup_fraction:g}, "
                f"8 connection slots; load average {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            first = fds(server.pid)
            print(f"t=0 s: server fds {first}, RSS {rss_kib(server.pid) / 1024:.1f} MiB")
            runner.start(args.rate, duration_s)
            start = time.monotonic()
            samples = []
            while time.monotonic() - start < duration_s:
                time.sleep(args.every_s)
                w = runner.take_window().get("all", {})  # {} when no window closed
                n = fds(server.pid)
                samples.append(n)
                print(
                    f"t={time.monotonic() - start:.0f} s: server fds {n}, "
                    f"RSS {rss_kib(server.pid) / 1024:.1f} MiB, opened "
                    f"{w.get('connections_opened', 0):.0f}, errors "
                    f"{w.get('connection_errors', 0):.0f}, hung up "
                    f"{w.get('connections_hung_up', 0):.0f}, sent {w.get('sent', 0):.0f}, lost "
                    f"{w.get('lost', 0):.0f}, abandoned {w.get('abandoned', 0):.0f}, handshake p50 "
                    f"{w.get('handshake_p50_ms', '-')} p99 {w.get('handshake_p99_ms', '-')} ms, "
                    f"load average {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
            result = runner.stop()
            time.sleep(1.0)
            print(f"after stop: server fds {fds(server.pid)} (before the load: {first})")
            c = result.connections or {}
            print(
                f"totals: sent {result.sent}, completed {result.completed}, lost {result.lost}, "
                f"abandoned {result.abandoned}, connections opened {c.get('opened')}, "
                f"errors {c.get('errors')}, hung up {c.get('hung_up')}, "
                f"TLS resumed {c.get('tls_resumed')}, handshake {c.get('handshake_ms')}"
            )
            print(f"server fds during the load: min {min(samples)}, max {max(samples)}")


if __name__ == "__main__":
    main()
