"""What the `pprof` and `smaps` samplers cost refdns: q/s and p99 with and without captures.

    .venv/bin/python bench/pprof_overhead.py                      # 40 s per run, 5,000 q/s
    .venv/bin/python bench/pprof_overhead.py --seconds 60 --capture-every-s 5
    .venv/bin/python bench/pprof_overhead.py --smoke   # seconds: that it still runs

refdns forwards to dnsmasq with its query log on; `soak load` (the built-in
engine) offers `--rate` q/s of the demo's mix of names (cached, local, blocked
and 10% fresh names, forwarded) for `--seconds`, three runs in turn: no sampler,
the pprof sampler capturing every `--capture-every-s` (far more often than its
600-s default, so that a cost shows if there is one), and the smaps sampler
every second. Prints each run's achieved q/s and p99, the time one capture and
one smaps read take, and the profile bytes a day at the default interval.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support

from tests.support.refdns import TOKEN, refdns  # noqa: E402
from tests.support.servers import ServerProc, dnsmasq_upstream  # noqa: E402

from soak.clock import NS_PER_S  # noqa: E402
from soak.profiles import list_profiles  # noqa: E402
from soak.runs.layout import profiles_dir  # noqa: E402
from soak.samplers.pprof import PprofSampler  # noqa: E402
from soak.samplers.selection import PprofSamplerConfig, SmapsSamplerConfig  # noqa: E402
from soak.samplers.smaps import SmapsSampler  # noqa: E402
from soak.targets.base import Running  # noqa: E402

S = NS_PER_S
SOAK = ROOT / ".venv" / "bin" / "soak"


def load(server: ServerProc, rate: float, seconds: float) -> dict[str, float]:
    done = subprocess.run(
        [str(SOAK), "load", "--server", f"127.0.0.1:{server.port}", "--scenario",
         str(ROOT / "scenarios" / "refdns-demo.yaml"), "--rate", str(rate),
         "--duration", str(seconds), "--json"],
        capture_output=True, text=True, check=False, timeout=seconds + 60,
    )  # fmt: skip
    out = json.loads(done.stdout)
    return {
        "qps": float(out["qps"]),
        "p99_ms": float(out["latency_ms"]["p99"] or float("nan")),
        "lost": float(out["lost"]),
    }


def sampling(sampler: object, every_s: float, stop: threading.Event, took: list[float]) -> None:
    t = 0
    while not stop.wait(every_s):
        t += 1
        start = time.perf_counter()
        sampler.sample(t * round(every_s * S))  # type: ignore[attr-defined]
        took.append(time.perf_counter() - start)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=5000)
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--capture-every-s", type=float, default=5)
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny sizes: that it runs")
    args = ap.parse_args()
    if args.smoke:
        args.rate, args.seconds, args.capture_every_s = 500.0, 1.5, 1.0
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rate:.0f} q/s for {args.seconds:.0f} s")
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        with (
            dnsmasq_upstream(tmp) as up,
            refdns(tmp / "data", "-querylog-mmap-bytes=67108864", upstream_port=up.port) as srv,
        ):
            running = Running("refdns", "127.0.0.1", {"api": srv.extra_ports["api"]}, srv.pid, None)
            kept = profiles_dir(tmp / "run")  # where a run keeps them
            pprof = PprofSampler(
                PprofSamplerConfig(interval_s=1, headers={"Authorization": f"Bearer {TOKEN}"}),
                lambda: running,
                background=False,  # timed here, in this script's own thread
                profiles_dir=kept,
            )
            smaps = SmapsSampler(SmapsSamplerConfig(), lambda: running)
            if not args.smoke:  # a smoke run's figures mean nothing: no warm-up
                load(srv, args.rate, 5)  # warm: cache, query log, heap
            rows = []
            for name, sampler, every_s in (
                ("none", None, 0.0),
                (f"pprof every {args.capture_every_s:g} s", pprof, args.capture_every_s),
                ("smaps every 1 s", smaps, 1.0),
                ("none (again)", None, 0.0),
            ):
                stop, took = threading.Event(), []
                thread = None
                if sampler is not None:
                    thread = threading.Thread(
                        target=sampling, args=(sampler, every_s, stop, took), daemon=True
                    )
                    thread.start()
                result = load(srv, args.rate, args.seconds)
                stop.set()
                if thread is not None:
                    thread.join()
                per = f"{1000 * sum(took) / len(took):.1f} ms x {len(took)}" if took else "-"
                rows.append((name, result, per))
                print(f"{name:22} {result['qps']:9.0f} q/s  p99 {result['p99_ms']:6.2f} ms  "
                      f"lost {result['lost']:.0f}  sampler {per}", flush=True)  # fmt: skip
            stored = list_profiles(kept)
            captures = len({p.time_ns for p in stored})
            per_capture = sum(p.bytes for p in stored) / max(1, captures)
            print(f"profiles: {captures} captures, {per_capture / 1024:.1f} KiB a capture "
                  f"(heap + goroutine, gzipped debug=1 text); at the 600-s default "
                  f"{per_capture * 144 / 2**20:.2f} MiB a day")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
