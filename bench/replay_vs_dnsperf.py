"""The replay (`soak load --replay`) against dnsperf on the same queries.

One unbound (one thread, local-data answers) on 127.0.0.1 and a capture made
here: --clients UDP clients taking turns through the six queries of
DEFAULT_QUERIES (tests/support/servers.py), evenly spaced at 1,000 q/s for
--span seconds; dnsperf reads the same queries in the capture's order
(`dnsperf -d`). Rounds alternate the two so that a busy moment hits both:

- flat out: dnsperf at full speed (-c clients) and the replay asked for
  --max-rate q/s (more than one process can send: it falls behind and skips):
  answers per second and CPU ms per 1,000 answers (cutime + cstime of this
  process's waited-for children); with --flat-out search, the replay's flat out is
  instead the highest asked rate (at most --max-rate) at which at most
  --search-miss of the queries due went unanswered in time, found each round by at
  most --search-probes replays starting at dnsperf's answered q/s of the round
  (bench/replay_rate_search.py): each probe printed, and the searched rate's answered
  q/s and CPU per 1,000 answers against dnsperf's of the same round;
- timing: the replay at each of --rates: achieved rate (sent / duration), the
  send-time offset from the plan (p50, p99, max, µs), skipped, generator-bound;
  dnsperf -Q at the same rate: achieved rate (dnsperf says nothing of timing).

- memory (--memory-s S): the replay at 2,000 q/s for S seconds, looping the
  capture S / span times; the `soak load` process's RSS every 5 s: the first
  reading after 30 s against the last.

--transport tcp, dot or doh: the replay over TCP, DoT or DoH (`--protocol`: a connection
per client; DoH's requests POST) and dnsperf `-m tcp` / `-m dot` / `-m doh` (-c
connections; DoH with `-O doh-method=POST`), against an unbound with
TLS listeners and 1,000 TCP slots (below; tests/support/unbound_counts.py); --engines
compiled,python: the replay in its compiled loop and, in the same rounds, in its
Python loop (SOAK_REPLAY_ENGINE=python), each against dnsperf.

The stream transports' unbound gets 1,000 TCP slots (--unbound-options, default
"incoming-num-tcp: 1000"; SLOTS says why), for dnsperf and the replay alike. Over TCP,
DoT and DoH each replay round also prints where its losses went: `lost`,
`late` (answered after the 1-s timeout), `send_failed` (never taken by a socket: its
connection not up in time, or broken), the connections opened and their errors, the
DoH streams the server reset or refused and its GOAWAYs, the queries the replay's
sockets took against unbound's own count of those it received (unbound-control
`total.num.queries`), and unbound's CPU seconds in the round.

--baseline-src DIR: a second build's compiled replay (DIR a copy of an older commit's src
with its extensions built, put first on PYTHONPATH) in the same rounds as this one, the
two in turns (which goes first alternates by round): a before/after of a change to the
compiled loop on the same machine at the same moment. Each round's figures are printed.

    PYTHONPATH=src .venv/bin/python bench/replay_vs_dnsperf.py [--runs 3] [--duration 5]
        [--rates 10000,50000] [--clients 100] [--memory-s 0] [--workers 2]
        [--transport udp|tcp|dot|doh] [--engines compiled,python] [--baseline-src DIR]
        [--flat-out fixed|search] [--search-probes 6] [--search-factor 1.25]
    PYTHONPATH=src .venv/bin/python bench/replay_vs_dnsperf.py --smoke   # seconds
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.replay_rate_search import Search, probe_line, search_rate, searched_line  # noqa: E402
from tests.support.servers import DEFAULT_QUERIES  # noqa: E402
from tests.support.tls import make_cert  # noqa: E402
from tests.support.unbound_counts import unbound_queries, unbound_with_control  # noqa: E402

from soak.hostproc import read_snmp_udp  # noqa: E402
from soak.procfs import parse_stat, udp_drops  # noqa: E402
from soak.traffic.capture_file import UDP, Capture, Query, write_capture  # noqa: E402

SOAK = str(Path(sys.executable).parent / "soak")
TICKS_S = os.sysconf("SC_CLK_TCK")
TYPES = {"A": 1, "AAAA": 28, "MX": 15}


def children_cpu_s() -> float:
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICKS_S


def wire_name(text: str) -> bytes:
    return b"".join(bytes([len(p)]) + p.encode() for p in text.split(".")) + b"\0"


def make_capture(folder: Path, clients: int, span_s: float) -> tuple[Path, Path]:
    """The capture (1,000 q/s, clients in turn) and the same queries as a dnsperf file."""
    n = int(span_s * 1000)
    lines = [DEFAULT_QUERIES[k % len(DEFAULT_QUERIES)] for k in range(n)]
    queries = []
    for k, line in enumerate(lines):
        name, qtype = line.split()
        queries.append(
            Query(k * 1_000_000, k % clients, 0, 0x0100, TYPES[qtype], UDP, wire_name(name))
        )
    cap = folder / "bench.soakcap"
    write_capture(
        cap, Capture("bench", [f"10.0.{c // 256}.{c % 256}" for c in range(clients)], queries)
    )
    qfile = folder / "bench-queries.txt"
    qfile.write_text("\n".join(lines) + "\n")
    return cap, qfile


TRANSPORT = "udp"  # main() sets it from --transport
# unbound's remote-control socket and pid where it has one (the stream transports): its
# own count of what it was sent, and its CPU, read around each replay (main() sets it).
SERVER: dict[str, object] = {}
# unbound's TCP slots for the stream transports (its config's 200 otherwise), for dnsperf
# and the replay alike: past half its slots unbound cuts a new connection's idle timeout
# to 1% (300 ms, then its 200-ms floor) and leaves those past all of them unaccepted, so
# a replay that opens more connections than its 100 clients (a DoH connection at the
# server's 100 streams in flight is replaced) lost queries to the server's slots: bytes
# its sockets took that unbound never read (docs/benchmarks.md).
SLOTS = "incoming-num-tcp: 1000"


def server_side() -> dict[str, float]:
    """What unbound says it received so far, its CPU seconds, and the datagrams the
    kernel dropped at its UDP socket (its receive buffer full: a witness apart from
    both generators' own counts); empty before main() started it."""
    sock, pid, port = SERVER.get("sock"), SERVER.get("pid"), SERVER.get("port")
    if not isinstance(sock, Path) or not isinstance(pid, int) or not isinstance(port, int):
        return {}
    return {
        "server_received": unbound_queries(sock)[0],
        "server_cpu_s": parse_stat(Path(f"/proc/{pid}/stat").read_text()).cpu_s,
        "server_udp_drops": udp_drops(pid, port),
        # every UDP socket's drops here (the generators' own sockets among them; other
        # processes' too, on a shared machine): beyond the server's, the client side's
        "all_udp_drops": read_snmp_udp()["RcvbufErrors"],
    }


def server_delta(before: dict[str, float]) -> dict[str, float]:
    after = server_side()
    return {k: round(after[k] - before[k], 2) for k in after}


def run_dnsperf(port: int, qfile: Path, duration_s: float, clients: int, rate: float = 0) -> dict:
    cpu0, server0 = children_cpu_s(), server_side()
    argv = ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", str(qfile), "-c", str(clients)]
    argv += ["-m", TRANSPORT]
    if TRANSPORT == "doh":  # the replay's requests: POST at /dns-query (doh.DohFlow)
        argv += ["-O", f"doh-uri=https://127.0.0.1:{port}/dns-query", "-O", "doh-method=POST"]
    argv += ["-l", str(duration_s)] + (["-Q", str(int(rate))] if rate else [])
    run = subprocess.run(argv, capture_output=True, text=True)
    out = run.stdout
    cpu, server = children_cpu_s() - cpu0, server_delta(server0)
    if "Queries completed:" not in out:  # dnsperf gave up (said on its stderr): once more
        print(f"dnsperf without figures (exit {run.returncode}): {run.stderr.strip()[-300:]}")
        return run_dnsperf(port, qfile, duration_s, clients, rate)
    done = int(re.search(r"Queries completed:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    sent = int(re.search(r"Queries sent:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    return {
        "answered_qps": done / duration_s,
        "sent_qps": sent / duration_s,
        "cpu_ms_per_1k": cpu / max(done, 1) * 1e6,
        "lost_pct": (sent - done) / max(sent, 1) * 100,  # sent, never answered in time
        "server": server,
    }


def run_replay(
    port: int,
    cap: Path,
    duration_s: float,
    rate: float,
    workers: int = 1,
    engine: str = "",
    src: str = "",
) -> dict:
    cpu0 = children_cpu_s()
    argv = [SOAK, "load", "--server", f"127.0.0.1:{port}", "--replay", str(cap)]
    argv += ["--workers", str(workers), "--protocol", TRANSPORT]
    argv += ["--rate", str(rate), "--duration", str(duration_s), "--json", "--timeout", "1"]
    env = {**os.environ, "SOAK_REPLAY_ENGINE": engine}  # "python": the Python loop
    if src:  # another build of soak, imported before this one
        env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
    server0 = server_side()
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout
    cpu, server = children_cpu_s() - cpu0, server_delta(server0)
    d = json.loads(out)
    conns, sockets = d["connections"], d["engine_counters"]
    return {
        # who lost what: never left a socket, answered after the timeout, reset by the
        # server; and what the server says it was sent (unbound's own count) and its CPU
        "losses": {
            "lost": d["lost"],
            "late": d["late"],
            "send_failed": sockets.get("send_failed", 0),
            "conn_opened": conns.get("opened", 0),
            "conn_errors": conns.get("errors", 0),
            "streams_reset": conns.get("streams_reset", 0),
            "streams_refused": conns.get("streams_refused", 0),
            "goaways": conns.get("goaways", 0),
            "socket_sent": sockets.get("socket_sent", 0),
            **server,
        },
        "answered_qps": d["completed"] / duration_s,
        "sent_qps": d["sent"] / duration_s,
        "cpu_ms_per_1k": cpu / max(d["completed"], 1) * 1e6,
        **{k: d[k] for k in ("completed", "lost", "abandoned")},
        "offset_us": d["send_offset_us"],
        "skipped": d["skipped"],
        "due": d["due"],
        "generator_bound": d["generator_bound"],
    }


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def memory(port: int, cap: Path, seconds: float) -> None:
    """The replay's own RSS over a long replay of the short capture."""
    import time

    argv = [SOAK, "load", "--server", f"127.0.0.1:{port}", "--replay", str(cap)]
    argv += ["--rate", "2000", "--duration", str(seconds), "--json", "--timeout", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    start = time.monotonic()
    readings: list[tuple[float, int]] = []
    while proc.poll() is None:
        try:
            readings.append((time.monotonic() - start, rss_kib(proc.pid)))
        except OSError:
            break
        time.sleep(5)
    out, _ = proc.communicate()
    d = json.loads(out)
    after_30 = [kib for t, kib in readings if t >= 30]
    print(
        f"\nmemory: {seconds:.0f} s at 2,000 q/s, {d['loops']} loops, {d['clients']} clients,"
        f" sent {d['sent']}, completed {d['completed']}: RSS after 30 s {after_30[0]} KiB,"
        f" last {after_30[-1]} KiB, max {max(after_30)} KiB"
    )


def med(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--span", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--rates", default="10000,50000")
    ap.add_argument("--max-rate", type=float, default=100_000)
    ap.add_argument("--memory-s", type=float, default=0)
    ap.add_argument("--workers", type=int, default=1, help="the replay's worker processes")
    ap.add_argument("--transport", choices=("udp", "tcp", "dot", "doh"), default="udp")
    ap.add_argument("--engines", default="compiled", help="the replay's loops: compiled,python")
    ap.add_argument("--baseline-src", default="", help="another build's src, in the same rounds")
    ap.add_argument(
        "--unbound-options", default=SLOTS, help="server: lines for unbound (stream transports)"
    )
    ap.add_argument(
        "--flat-out",
        choices=("fixed", "search"),
        default="fixed",
        help="the replay's flat out: asked --max-rate (fixed), or the highest rate it gets"
        " answered (search: at most --search-probes replays of --duration s a round)",
    )
    ap.add_argument("--search-probes", type=int, default=6, help="search: replays a round")
    ap.add_argument("--search-factor", type=float, default=1.25, help="search: step up/down")
    ap.add_argument("--search-miss", type=float, default=0.01, help="search: unanswered/due")
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny sizes: that it runs")
    args = ap.parse_args()
    global TRANSPORT
    TRANSPORT = args.transport
    engines = {"compiled": "replay", "python": "replay-python"}
    names = [engines[e] for e in args.engines.split(",")]
    if args.baseline_src:
        names.append("replay-base")
    if args.smoke:
        args.runs, args.duration, args.span, args.clients = 1, 1.0, 2.0, 4
        args.rates, args.max_rate, args.search_probes = "2000", 20_000, 3
    rates = [float(r) for r in args.rates.split(",") if r]
    search = Search(args.search_factor, args.search_probes, args.search_miss, args.max_rate)
    print(f"{os.cpu_count()} CPUs, load average {Path('/proc/loadavg').read_text().split()[:3]}")
    print(f"transport {TRANSPORT}")
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        cap, qfile = make_capture(tmp, args.clients, args.span)
        with contextlib.ExitStack() as stack:
            # its TCP slots, DoT and DoH listeners, its remote-control socket (for UDP too:
            # its own count and CPU, and its socket's drops, say where losses went)
            started = unbound_with_control(tmp, make_cert(tmp), args.unbound_options)
            server, sock = stack.enter_context(started)
            port = server.port_for(TRANSPORT)
            SERVER.update(sock=sock, pid=server.pid, port=port)
            if args.memory_s:
                memory(port, cap, args.memory_s)
                return
            flat: dict[str, list[dict]] = {n: [] for n in ["dnsperf", *names]}
            timing = {r: {n: [] for n in ["dnsperf", *names]} for r in rates}
            loop_of = {"replay": "", "replay-python": "python", "replay-base": ""}
            src_of = {"replay-base": args.baseline_src}

            def replay(n: str, rate: float) -> dict:
                src = src_of.get(n, "")
                return run_replay(port, cap, args.duration, rate, args.workers, loop_of[n], src)

            def flat_out(k: int, n: str) -> dict:
                if args.flat_out == "fixed":
                    return replay(n, args.max_rate)
                dp = flat["dnsperf"][-1]
                best, tried = search_rate(lambda r: replay(n, r), dp["answered_qps"], search)
                for x in tried:
                    print(probe_line(k, n, x), flush=True)
                print(searched_line(k, n, best, dp, len(tried)), flush=True)
                return best

            for k in range(args.runs):
                order = names if k % 2 == 0 else names[::-1]
                flat["dnsperf"].append(run_dnsperf(port, qfile, args.duration, args.clients))
                dnsperf_line(k, flat["dnsperf"][-1])
                for n in order:
                    flat[n].append(flat_out(k, n))
                    round_line(k, n, f"flat out ({args.flat_out})", flat[n][-1])
                for r in rates:
                    for n in order:
                        timing[r][n].append(replay(n, r))
                        round_line(k, n, f"{r:.0f} q/s", timing[r][n][-1])
                    timing[r]["dnsperf"].append(
                        run_dnsperf(port, qfile, args.duration, args.clients, r)
                    )
    print(f"\nflat out ({args.flat_out}), {args.clients} clients, medians of {args.runs}:")
    for name, rows in flat.items():
        print(
            f"  {name:13} answered {med(rows, 'answered_qps'):10.0f} q/s"
            f"  CPU {med(rows, 'cpu_ms_per_1k'):6.1f} ms per 1,000 answers"
        )
    for n in names:
        ratio_qps = med(flat[n], "answered_qps") / med(flat["dnsperf"], "answered_qps")
        ratio_cpu = med(flat[n], "cpu_ms_per_1k") / med(flat["dnsperf"], "cpu_ms_per_1k")
        print(f"  ratio {n}/dnsperf: answered q/s {ratio_qps:.2f}, CPU per answer {ratio_cpu:.2f}")
        if args.flat_out == "search":
            found = [f"{x['rate_qps']:.0f}{'' if x['ok'] else ' (none within)'}" for x in flat[n]]
            print(f"  {n} searched rates (q/s): {', '.join(found)}")
    print("\nfixed rates, medians:")
    for r in rates:
        for n in names:
            fixed_rate_line(r, n, timing[r][n], timing[r]["dnsperf"])


def round_line(k: int, name: str, what: str, x: dict) -> None:
    load = Path("/proc/loadavg").read_text().split()[0]
    p = x["offset_us"]
    print(
        f"  round {k} {name} {what}: answered {x['answered_qps']:.0f} q/s,"
        f" CPU {x['cpu_ms_per_1k']:.1f} ms/1k, offset p50 {p['p50']:.0f} p99 {p['p99']:.0f} µs,"
        f" skipped {x['skipped']}, load average {load}",
        flush=True,
    )
    if x["losses"]["server_received"]:
        print(f"    {x['losses']}", flush=True)


def dnsperf_line(k: int, x: dict) -> None:
    print(
        f"  round {k} dnsperf flat out: answered {x['answered_qps']:.0f} q/s,"
        f" CPU {x['cpu_ms_per_1k']:.1f} ms/1k, lost {x['lost_pct']:.2f}%; {x['server']}",
        flush=True,
    )


def fixed_rate_line(r: float, name: str, rep: list[dict], dp: list[dict]) -> None:
    p50 = statistics.median(x["offset_us"]["p50"] for x in rep)
    p99 = statistics.median(x["offset_us"]["p99"] for x in rep)
    mx = statistics.median(x["offset_us"]["max"] for x in rep)
    print(
        f"  {r:8.0f} q/s: {name} sent {med(rep, 'sent_qps'):8.0f} q/s,"
        f" offset p50 {p50:.0f} p99 {p99:.0f} max {mx:.0f} µs,"
        f" skipped {med(rep, 'skipped'):.0f} of {med(rep, 'due'):.0f},"
        f" generator-bound {[x['generator_bound'] for x in rep]},"
        f" CPU {med(rep, 'cpu_ms_per_1k'):.1f} ms/1k;"
        f" dnsperf sent {med(dp, 'sent_qps'):8.0f} q/s,"
        f" CPU {med(dp, 'cpu_ms_per_1k'):.1f} ms/1k"
    )


if __name__ == "__main__":
    main()
