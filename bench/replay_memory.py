"""The replay's own memory over hours: a day's replay planned from a real capture.

The capture is made here the way a user makes one: unbound (one thread, local-data
answers) writes its client queries as dnstap to `soak capture --dnstap-socket
--clients-by-port` while `soak load` drives it from --flows UDP source ports at
--capture-qps for --capture-s seconds (the six queries of DEFAULT_QUERIES,
tests/support/servers.py). Each source port is a client of the capture.

The replay is the engine `soak load --replay` runs (soak.load.replay.Replay), in a
process of its own started by this script (`child`), planned for --plan-s seconds
(a day by default: the capture looped with time shifted, new sockets each loop)
against a second unbound, at the capture's own timing, over --transport (the replay
config's: the capture's own, UDP, TCP, DoT or DoH; for DoT and DoH the unbound listens
with a throwaway certificate). Only a compiled loop is measured: the UDP loop, or the
TCP/DoT or DoH stream loop; where the Python loop would play (it says so on stderr),
the bench fails. A day's plan is cut at --memory-s: SIGTERM ends the sending, the
queries in flight end, and the child prints the replay's result. Every --every-s the
child's VmRSS, RssAnon and RssFile (/proc/PID/status) and the resident anonymous part
of its [heap] (/proc/PID/smaps: glibc's main arena; the rest of RssAnon is mmapped
blocks) go to rss.jsonl in --out; every 60 s and at its end the child writes the sizes
of its Python tables (windows handed over, offsets, histograms' buckets, connections
open), glibc's own account of its heap (mallinfo2: in use, free but held, the arenas'
size) and the queries answered so far to sizes.jsonl; the compiled loop's own tables
are C's and not among them.

Printed: RSS after the first 5 minutes, at the end, the largest; the least-squares
slope of RSS over the last 90 minutes in KiB/h with its standard error and the
readings' scatter about the line (the same for the [heap]'s part); malloc's in use
and free held from 5 minutes to the end; queries sent, answered, lost; clients replayed
against clients in the capture.

    PYTHONPATH=src .venv/bin/python bench/replay_memory.py --out /work/mem-run \\
        [--capture-s 600] [--capture-qps 1000] [--flows 100] [--plan-s 86400] \\
        [--memory-s 7200] [--every-s 30] [--capture FILE] \\
        [--transport {capture,udp,tcp,dot,doh}]
    PYTHONPATH=src .venv/bin/python bench/replay_memory.py report --out DIR
    PYTHONPATH=src .venv/bin/python bench/replay_memory.py --smoke [--transport dot]
        # seconds, a temporary --out

--capture FILE replays a capture made before (soak capture, pcap or dnstap) rather
than making one; `report` prints the figures again from DIR's files (a run still
going included).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.smaps_by_kind import anonymous_by_kind  # noqa: E402
from tests.support.servers import DEFAULT_QUERIES, ServerProc, unbound  # noqa: E402
from tests.support.tls import make_cert  # noqa: E402
from tests.support.traffic import unbound_dnstap  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

SOAK = str(Path(sys.executable).parent / "soak")
FIRST_S = 300.0  # RSS "after the first 5 minutes": the first reading from here on
SLOPE_WINDOW_S = 5400.0  # the slope over the last 90 minutes
S_PER_H = 3600.0
OPTIONS: dict[str, tuple[type, float, str]] = {
    "--capture-s": (float, 600, "the capture's length"),
    "--capture-qps": (float, 1000, "the rate soak load drives the captured server at"),
    "--flows": (int, 100, "soak load's UDP source ports: the capture's clients"),
    "--plan-s": (float, 86400, "the replay's planned length (a day)"),
    "--memory-s": (float, 7200, "where the plan is cut: the run's length"),
    "--every-s": (float, 30, "RSS read this often"),
    "--timeout": (float, 1.0, "the replay's query timeout"),
}
TRANSPORTS = ("capture", "udp", "tcp", "dot", "doh")  # ReplayConfig.transport's values
# unbound's connections at once over TCP, DoT and DoH (its default is 10 a thread): every
# client's connections of one loop, and the last loop's while they close.
TCP_SLOTS = 1000
# What the Python loop says on stderr when it plays a replay (soak.load.replay._engine).
PYTHON_SAID = "soak: replay in the Python loop:"


# ------------------------------------------------------------ the capture


def make_capture(out: Path, capture_s: float, qps: float, flows: int) -> Path:
    """A dnstap capture by `soak capture` of `soak load` against unbound."""
    cap, sock = out / "capture.soakcap", out / "tap.sock"
    qfile = out / "queries.txt"
    qfile.write_text("\n".join(DEFAULT_QUERIES) + "\n")
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        # Listening for as long as unbound needs to start, the load, and its drain.
        listen_s = capture_s + 30
        recorder = subprocess.Popen(
            [
                *(SOAK, "capture", "--dnstap-socket", str(sock)),
                *("--duration", f"{listen_s:.0f}s", "--clients-by-port", "-o", str(cap), "--json"),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        wait_for(lambda: sock.exists() or recorder.poll() is not None, 30, "dnstap socket", 0.05)
        started = time.monotonic()
        with unbound_dnstap(tmp, sock) as server:
            load = subprocess.run(
                [
                    *(SOAK, "load", "--server", f"127.0.0.1:{server.port}"),
                    *("--queries", str(qfile)),
                    *("--rate", f"{qps:g}", "--duration", f"{capture_s:g}", "--flows", str(flows)),
                    "--json",
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            sent = json.loads(load.stdout)["sent"]
            left_s = listen_s - (time.monotonic() - started)
            out_text, _ = recorder.communicate(timeout=left_s + 60)
    info = json.loads(out_text)
    print(f"capture: soak load sent {sent}; {json.dumps(info)}", flush=True)
    (out / "capture.json").write_text(json.dumps({"load_sent": sent, **info}) + "\n")
    return cap


# ------------------------------------------------------------ the replay's process


def child(args: argparse.Namespace) -> None:
    """The replay planned for `plan_s`, sending until SIGTERM; its result as JSON. Only
    a compiled loop is measured here: a replay the Python loop would play ends at once."""
    from soak.load.replay import Replay, load_replay
    from soak.load.replay._engine import python_reason
    from soak.traffic.replay_config import ReplayConfig

    cfg = ReplayConfig(file=Path(args.capture), transport=args.transport)
    replay = Replay(cfg, load_replay(cfg), "127.0.0.1", args.port, args.timeout)
    reason = python_reason(replay)
    if reason is not None:
        raise SystemExit(f"replay_memory: not the compiled loop ({reason})")
    print(f"replay_memory: the compiled loop plays the replay ({args.transport})", file=sys.stderr)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    sizes = Path(args.out) / "sizes.jsonl"
    every_s = args.sizes_every_s
    watch = (replay, sizes, stop, every_s)
    watcher = threading.Thread(target=watch_sizes, args=watch, daemon=True)
    watcher.start()
    result = replay.run(args.plan_s, stopping=stop.is_set).as_dict()
    stop.set()  # the plan's end, if not the cut: the watcher's last row
    watcher.join()
    per_client = result.pop("sent_per_client")
    result["clients_replayed"] = sum(1 for n in per_client if n > 0)
    result["transport"] = args.transport
    print(json.dumps(result))


def watch_sizes(replay: Any, path: Path, stop: threading.Event, every_s: float) -> None:
    """The replay's Python tables, by length, every `every_s` (a minute): which one
    follows the run's length. The compiled loop's own tables (its connections, id slots,
    open windows) are C's and not read here; of them, the connections open (as the stream
    loop last told ClientConns) are. Its Python ones are the windows it handed over (the
    ledger's), their send offsets and latency and rcode keys, and the handshake times."""
    start = time.monotonic()
    with path.open("a") as f:
        stopped = False
        while not stopped:  # a last row once stopped: a short run has one at least
            stopped = stop.wait(every_s)
            conns = replay.conns
            row = {
                "t_s": round(time.monotonic() - start, 1),
                "windows": len(replay.ledger.windows),
                "offset_buckets": replay.offsets.buckets_used(),
                # closed windows' latencies are summed in the ledger's histograms
                "latency_buckets": sum(len(h.counts) for h in replay.ledger.hists),
                "rcode_keys": sum(len(cw.rcodes) for cw in replay.ledger.per_class),
                "answered": sum(cw.completed for cw in replay.ledger.per_class),
                "open_sockets": conns.open_sockets,
                **malloc_kib(),
                # Python's own objects alive (pymalloc and raw): a Python table that
                # grows shows here though its length is read nowhere else
                "py_blocks": sys.getallocatedblocks(),
                "handshake_values": len(conns.handshake.counts) + len(conns.book.handshake_us),
                # the capture played so far: queries due over its queries
                "loops": round(
                    sum(cw.due for cw in replay.ledger.per_class)
                    / max(1, len(replay.plan.capture.queries)),
                    2,
                ),
            }
            f.write(json.dumps(row) + "\n")
            f.flush()


# ------------------------------------------------------------ the readings


class _Mallinfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (malloc.h), every field a size_t."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def malloc_kib() -> dict[str, int]:
    """glibc's own account of this process's heap (mallinfo2, every arena): in use (the
    chunks handed out, mmapped ones included) and free but held. What in use does not
    explain of RssAnon is Python's own arenas, the stacks, or pages the allocator keeps:
    growth of in use is something kept; growth of free held is the allocator's."""
    libc = ctypes.CDLL(None)
    fn = getattr(libc, "mallinfo2", None)
    if fn is None:  # not glibc, or one older than 2.33
        return {}
    fn.restype = _Mallinfo2
    m = fn()
    return {
        "malloc_in_use_kib": (m.uordblks + m.hblkhd) // 1024,
        "malloc_free_kib": m.fordblks // 1024,
        "malloc_arenas_kib": m.arena // 1024,
    }


def status_kib(pid: int) -> dict[str, int]:
    fields = {"VmRSS": "rss_kib", "RssAnon": "anon_kib", "RssFile": "file_kib"}
    found: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(":", 1)[0]
        if key in fields:
            found[fields[key]] = int(line.split()[1])
    return found


def heap_anon_kib(pid: int) -> dict[str, Any]:
    """The resident anonymous KiB of the process's [heap] (glibc's main arena, grown by
    brk) apart from the rest of RssAnon (mmapped blocks: the compiled loop's window
    tables, Python's arenas, other arenas): which of the two a rise is in."""
    by_kind = anonymous_by_kind(Path(f"/proc/{pid}/smaps").read_text())
    # every kind too: a rise outside the [heap] is in one of them (pymalloc's 1-MiB
    # arenas, another thread's arena, the compiled loop's large blocks)
    return {"heap_anon_kib": by_kind["[heap]"], "anon_by_kind_kib": dict(by_kind)}


def slope_kib_h(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Least squares over (t_s, KiB): slope in KiB/h, its standard error, and the
    readings' standard deviation about the line (KiB)."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((t - mt) ** 2 for t, _ in points)
    b = sum((t - mt) * (y - my) for t, y in points) / sxx
    resid = [y - (my + b * (t - mt)) for t, y in points]
    s = math.sqrt(sum(r * r for r in resid) / max(n - 2, 1))
    return b * S_PER_H, s / math.sqrt(sxx) * S_PER_H, s


def report(out: Path, first_s: float = FIRST_S) -> None:
    rows = [json.loads(line) for line in (out / "rss.jsonl").read_text().splitlines()]
    for key in ("rss_kib", "anon_kib", "heap_anon_kib"):
        keyed = [r for r in rows if key in r]  # a reading before the [heap] was read has none
        after = [r for r in keyed if r["t_s"] >= first_s]
        if not after:
            print(f"{key}: no reading after {first_s:.0f} s")
            continue
        end_t = keyed[-1]["t_s"]
        since = max(end_t - SLOPE_WINDOW_S, first_s)  # never the start-up's readings
        last = [(r["t_s"], r[key]) for r in keyed if r["t_s"] >= since]
        b, se, s = slope_kib_h(last) if len(last) > 2 else (0.0, 0.0, 0.0)
        top = max(keyed, key=lambda r: r[key])
        print(
            f"{key}: at {after[0]['t_s']:.0f} s {after[0][key]:,} KiB, at the end"
            f" ({end_t:.0f} s) {keyed[-1][key]:,} KiB, max {top[key]:,} KiB"
            f" (at {top['t_s']:.0f} s); slope over the last"
            f" {(end_t - last[0][0]) / 60:.0f} min ({len(last)} readings):"
            f" {b:+,.1f} ± {se:,.1f} KiB/h (standard error), readings' scatter about"
            f" the line {s:,.1f} KiB"
        )
    report_malloc(out, first_s)
    result_path = out / "result.json"
    if result_path.exists():
        d = json.loads(result_path.read_text())
        cap = json.loads((out / "capture.json").read_text())
        print(
            f"replay ({d.get('transport', 'capture')}): {d['loops']} loops in"
            f" {d['duration_s']:.0f} s, due {d['due']:,},"
            f" sent {d['sent']:,}, answered {d['completed']:,}, lost {d['lost']:,}"
            f" (late {d['late']}), skipped {d['skipped']:,}, abandoned {d['abandoned']:,};"
            f" send offset µs {d['send_offset_us']}; generator-bound {d['generator_bound']};"
            f" clients replayed {d['clients_replayed']} of {d['clients']} in the capture"
            f" ({cap['clients']} by the capture's summary);"
            f" client sockets at once, at most {d['client_sockets_peak']};"
            f" connections {d.get('connections', {})}"
        )


def report_malloc(out: Path, first_s: float) -> None:
    """glibc's in use and free held (sizes.jsonl) at the first reading from first_s and
    at the last: a rise in use is something kept, a rise in free held the allocator's."""
    path = out / "sizes.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    rows = [r for r in rows if "malloc_in_use_kib" in r and r["t_s"] >= first_s]
    if not rows:
        return
    a, b = rows[0], rows[-1]
    print(
        f"malloc (mallinfo2): in use {a['malloc_in_use_kib']:,} -> {b['malloc_in_use_kib']:,}"
        f" KiB, free held {a['malloc_free_kib']:,} -> {b['malloc_free_kib']:,} KiB, arenas"
        f" {a['malloc_arenas_kib']:,} -> {b['malloc_arenas_kib']:,} KiB"
        f" ({a['t_s']:.0f} s -> {b['t_s']:.0f} s)"
    )


def catches_sigterm(pid: int) -> bool:
    """Whether the child has its SIGTERM handler yet (a busy machine's imports can take
    longer than a short run: a SIGTERM before it would kill the child, not end the replay)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


@contextlib.contextmanager
def replayed_server(tmp: Path, transport: str) -> Iterator[tuple[ServerProc, int]]:
    """The unbound the replay plays against, and the port for `transport`: with DoT and
    DoH listeners (a throwaway certificate) when the replay needs them."""
    if transport in ("dot", "doh"):
        tls = make_cert(tmp)
        with unbound(tmp, tls=tls, tls_options=f"incoming-num-tcp: {TCP_SLOTS}") as server:
            yield server, server.port_for(transport)
    else:
        with unbound(tmp, tcp_slots=TCP_SLOTS) as server:
            yield server, server.port


def echo_stderr(stream: IO[str], said: list[str]) -> None:
    """The child's stderr into ours, line by line; the Python loop's word kept in `said`."""
    for line in stream:
        sys.stderr.write(line)
        sys.stderr.flush()
        if PYTHON_SAID in line:
            said.append(line.strip())


def replay_and_sample(args: argparse.Namespace, cap: Path, out: Path) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp_s,
        replayed_server(Path(tmp_s), args.transport) as (_, port),
    ):
        proc = subprocess.Popen(
            [
                *(sys.executable, __file__, "child", "--capture", str(cap), "--out", str(out)),
                *("--port", str(port), "--plan-s", str(args.plan_s)),
                *("--timeout", str(args.timeout), "--transport", args.transport),
                *("--sizes-every-s", str(args.sizes_every_s)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        said: list[str] = []
        echo = threading.Thread(target=echo_stderr, args=(proc.stderr, said), daemon=True)
        echo.start()
        sample(args, proc, out)
        stdout = proc.stdout.read() if proc.stdout is not None else ""
        proc.wait()
        echo.join()
    if said:
        raise SystemExit(f"the Python loop played the replay, not the compiled one: {said[0]}")
    if proc.returncode != 0:
        raise SystemExit(f"the replay failed (exit {proc.returncode})")
    (out / "result.json").write_text(stdout)


def sample(args: argparse.Namespace, proc: subprocess.Popen[str], out: Path) -> None:
    """The child's RSS every --every-s into rss.jsonl, until it ends or --memory-s: then
    SIGTERM (once it catches it), and a last reading."""
    start = time.monotonic()
    with (out / "rss.jsonl").open("w") as f:
        while proc.poll() is None:
            t = time.monotonic() - start
            if t >= args.memory_s and catches_sigterm(proc.pid):
                proc.send_signal(signal.SIGTERM)
                break
            row = {"t_s": round(t, 1), "at": time.strftime("%H:%M:%S"), **status_kib(proc.pid)}
            row.update(heap_anon_kib(proc.pid))
            f.write(json.dumps(row) + "\n")
            f.flush()
            time.sleep(args.every_s - (time.monotonic() - start) % args.every_s)
        running = proc.poll() is None
        with_end = {**status_kib(proc.pid), **heap_anon_kib(proc.pid)} if running else {}
        if with_end:
            t = round(time.monotonic() - start, 1)
            f.write(json.dumps({"t_s": t, "at": time.strftime("%H:%M:%S"), **with_end}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", nargs="?", default="run", choices=["run", "child", "report"])
    ap.add_argument("--out", help="where the files go (--smoke: a temporary directory)")
    for flag, (kind, default, what) in OPTIONS.items():
        ap.add_argument(flag, type=kind, default=default, help=what)
    ap.add_argument("--capture", help="child: the capture file; run: reuse this one")
    ap.add_argument(
        "--transport", choices=TRANSPORTS, default="capture", help="the replay's transport"
    )
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--sizes-every-s", type=float, default=60.0, help="child: tables read")
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny sizes: that it runs")
    args = ap.parse_args()
    if args.smoke:
        smoke(args)
        return
    if args.out is None:
        ap.error("--out is required")
    out = Path(args.out)
    if args.mode == "child":
        child(args)
        return
    if args.mode == "report":
        report(out)
        return
    out.mkdir(parents=True, exist_ok=True)
    print(f"{os.cpu_count()} CPUs, load average {Path('/proc/loadavg').read_text().split()[:3]}")
    if args.capture:  # one made before (a soak capture, pcap or dnstap file), converted
        cap = out / "capture.soakcap"
        argv = [SOAK, "capture", "--from", args.capture, "-o", str(cap), "--json"]
        converted = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        (out / "capture.json").write_text(converted)
    else:
        cap = make_capture(out, args.capture_s, args.capture_qps, args.flows)
    print(f"replay: planned {args.plan_s:.0f} s, cut at {args.memory_s:.0f} s", flush=True)
    replay_and_sample(args, cap, out)
    report(out)


def smoke(args: argparse.Namespace) -> None:
    """A 2-s capture (in a 32-s listen, as the full run's) replayed for 4 s, read every
    second, in a temporary directory."""
    out = Path(tempfile.mkdtemp(prefix="soak-bench-replay-"))
    try:
        args.capture_s, args.capture_qps, args.flows = 2.0, 200.0, 4
        args.plan_s, args.memory_s, args.every_s = 60.0, 4.0, 1.0
        args.sizes_every_s = 1.0
        cap = make_capture(out, args.capture_s, args.capture_qps, args.flows)
        replay_and_sample(args, cap, out)
        if not (out / "sizes.jsonl").read_text().strip():
            raise SystemExit("the replay's tables were not read (sizes.jsonl is empty)")
        report(out, first_s=1.0)
    finally:
        shutil.rmtree(out)


if __name__ == "__main__":
    main()
