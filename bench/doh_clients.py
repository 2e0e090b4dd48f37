"""DoH clients compared: soak's load engine (h2 state machine on its own loop) against
httpx's AsyncClient with HTTP/2 (h2 underneath as well), flat out over one connection.

Starts unbound (one thread) with DoH on loopback and a throwaway certificate, then
alternately runs `soak load --protocol doh --rate max --flows 1` (100 outstanding)
and an asyncio client that keeps 100 httpx POSTs in flight on one HTTP/2
connection, and prints each one's q/s and CPU ms per 1,000 answered queries
(user + system of the process doing it, start-up included for soak).

    .venv/bin/python bench/doh_clients.py [--runs 3] [--duration 5]
    .venv/bin/python bench/doh_clients.py --smoke       # seconds: that it still runs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import dns.message  # noqa: E402
import httpx  # noqa: E402
from tests.support.servers import unbound  # noqa: E402
from tests.support.tls import make_cert  # noqa: E402

SOAK = str(Path(sys.executable).parent / "soak")
IN_FLIGHT = 100


def soak_run(port: int, qfile: Path, duration_s: float) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    argv = [SOAK, "load", "--server", f"127.0.0.1:{port}", "--queries", str(qfile)]
    argv += ["--protocol", "doh", "--rate", "max", "--flows", "1", "--duration", str(duration_s)]
    out = subprocess.run([*argv, "--json"], capture_output=True, text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    d = json.loads(out)
    return d["qps"], cpu / d["completed"] * 1e6


async def httpx_client(port: int, duration_s: float) -> int:
    wire = dns.message.make_query("www.example.test", "A", id=0).to_wire()
    headers = {"content-type": "application/dns-message", "accept": "application/dns-message"}
    url = f"https://127.0.0.1:{port}/dns-query"
    done = 0
    end = time.monotonic() + duration_s
    async with httpx.AsyncClient(http2=True, verify=False) as client:

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < end:
                resp = await client.post(url, content=wire, headers=headers)
                if resp.status_code == 200 and len(resp.content) >= 12:
                    done += 1

        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return done


def httpx_run(port: int, duration_s: float) -> tuple[float, float]:
    """In a child interpreter, so that its CPU is counted like soak's."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    code = (
        f"import asyncio, sys; sys.path.insert(0, {str(ROOT)!r}); "
        "from bench.doh_clients import httpx_client; "
        f"print(asyncio.run(httpx_client({port}, {duration_s})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    done = int(out.stdout.strip())
    return done / duration_s, cpu / done * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny sizes: that it runs")
    args = ap.parse_args()
    if args.smoke:  # 2 s: httpx's first answers come after its connection's set-up
        args.runs, args.duration = 1, 2.0
    with tempfile.TemporaryDirectory(prefix="soak-bench-doh-") as tmp:
        qfile = Path(tmp) / "queries.txt"
        qfile.write_text("www.example.test A\n")
        cert = make_cert(Path(tmp))
        with unbound(Path(tmp), tls=cert) as server:
            port = server.extra_ports["doh"]
            print(f"unbound DoH on 127.0.0.1:{port}, load average {os.getloadavg()[0]:.2f}")
            soak: list[tuple[float, float]] = []
            hx: list[tuple[float, float]] = []
            for i in range(args.runs):
                soak.append(soak_run(port, qfile, args.duration))
                hx.append(httpx_run(port, args.duration))
                print(
                    f"run {i + 1}: soak {soak[-1][0]:,.0f} q/s {soak[-1][1]:.1f} ms/1000, "
                    f"httpx {hx[-1][0]:,.0f} q/s {hx[-1][1]:.1f} ms/1000",
                    flush=True,
                )
            sq, sc = statistics.median(q for q, _ in soak), statistics.median(c for _, c in soak)
            hq, hc = statistics.median(q for q, _ in hx), statistics.median(c for _, c in hx)
            print(f"load average after {os.getloadavg()[0]:.2f}")
            print(f"median soak {sq:,.0f} q/s, {sc:.1f} ms CPU per 1,000 answered")
            print(f"median httpx {hq:,.0f} q/s, {hc:.1f} ms CPU per 1,000 answered")
            print(f"ratio soak/httpx: q/s {sq / hq:.2f}, CPU per query {sc / hc:.2f}")


if __name__ == "__main__":
    main()
