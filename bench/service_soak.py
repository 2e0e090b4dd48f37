"""The service watching itself: a long soak at 1-s ticks, the service's own RSS and fds.

    python bench/service_soak.py                 # 30 minutes (the issue's figure)
    python bench/service_soak.py --minutes 10    # shorter
    python bench/service_soak.py --smoke         # 15 s, 2-s windows: that it still runs

Starts `soak serve` on loopback with a temporary data directory, submits
scenarios/pdns-recursor-dnsmasq.yaml scaled to --minutes at 1-s ticks, and samples
the service process (RSS, anonymous RSS, fds, threads) every second on absolute
deadlines. After the run it gives the service's own leak verdicts (the same
analysis a soak gives its target: window minima, Theil-Sen, Mann-Kendall) on the
samples after the warm-up, and prints the figures as Markdown for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(ROOT / "src"))

import soak  # noqa: E402
from soak.analysis.leaks import leak_verdict  # noqa: E402

# The service runs the same code as this script (PYTHONPATH may point at a frozen copy,
# so that edits to the tree during a 30-minute run do not mix versions).
CODE_ROOT = Path(soak.__file__).resolve().parents[1]

SCENARIO = ROOT / "scenarios" / "pdns-recursor-dnsmasq.yaml"
TOKEN = "bench-token"
MiB = 1024**2


def proc_figures(pid: int) -> dict[str, float]:
    fields: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "Threads"):
            number = float(value.split()[0])
            fields[key] = number * 1024 if key != "Threads" else number
    fields["fds"] = float(len(os.listdir(f"/proc/{pid}/fd")))
    return fields


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def api(port: int, path: str) -> Any:
    r = httpx.get(
        f"http://127.0.0.1:{port}{path}",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10.0,
    )
    r.raise_for_status()
    return r.json()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--warmup-share", type=float, default=1 / 6)
    ap.add_argument("--window-s", type=float, default=120.0)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--smoke", action="store_true", help="15 s, 2-s windows: that it runs")
    args = ap.parse_args()
    if args.smoke:
        args.minutes, args.window_s = 0.25, 2.0
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))  # run the clean-ups
    duration_s = args.minutes * 60
    soak_cmd = [sys.executable, "-m", "soak.cli"]
    env = {**os.environ, "SOAK_TOKEN": TOKEN, "PYTHONPATH": str(CODE_ROOT)}
    with tempfile.TemporaryDirectory(prefix="soak-bench-") as tmp:
        data = Path(tmp) / "data"
        port = free_port()
        log = open(Path(tmp) / "serve.log", "wb")  # noqa: SIM115
        serve = subprocess.Popen(
            [*soak_cmd, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data)],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
        try:
            return run(serve, port, duration_s, args, soak_cmd, env)
        finally:
            stop_runs(port)  # a service that stops leaves its targets running: stop them first
            if serve.poll() is None:
                serve.send_signal(signal.SIGTERM)
                serve.wait(60)
            log.close()


def stop_runs(port: int) -> None:
    try:
        for r in api(port, "/runs")["runs"]:
            if r["status"] in ("pending", "running"):
                httpx.post(
                    f"http://127.0.0.1:{port}/runs/{r['id']}/stop",
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    timeout=10.0,
                )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(
            r["status"] in ("pending", "running") for r in api(port, "/runs")["runs"]
        ):
            time.sleep(0.5)
    except httpx.HTTPError as exc:
        print(f"bench: could not stop the runs: {exc}", file=sys.stderr)


def run(
    serve: subprocess.Popen[bytes],
    port: int,
    duration_s: float,
    args: argparse.Namespace,
    soak: list[str],
    env: dict[str, str],
) -> int:
    deadline = time.monotonic() + 20
    while True:
        try:
            if api(port, "/healthz")["ok"]:
                break
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    submitted = subprocess.run(
        [*soak, "start", str(SCENARIO), "--duration", f"{duration_s:g}s",
         "--set", "samplers.interval_s=1", "--set", "leaks.window_s=60s",
         "--set", "leaks.interval_s=60s", "--server", f"http://127.0.0.1:{port}"],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    run_id = submitted.stdout.strip()
    samples: list[tuple[float, dict[str, float]]] = []
    start = time.monotonic()
    t0 = time.time()
    tick = 0
    status: dict[str, Any] = {}
    while True:
        tick += 1
        samples.append((time.time() - t0, proc_figures(serve.pid)))
        if tick % 10 == 0:
            status = api(port, f"/runs/{run_id}")
            if status["status"] not in ("pending", "running"):
                break
        time.sleep(max(0.0, start + tick - time.monotonic()))
    status = api(port, f"/runs/{run_id}")
    figures = summarise(samples, status, args)
    print(markdown(figures, args, duration_s))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


def summarise(
    samples: list[tuple[float, dict[str, float]]], status: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    warm_s = samples[-1][0] * args.warmup_share
    after = [(t, f) for t, f in samples if t >= warm_s]
    out: dict[str, Any] = {"run": status["id"], "status": status["status"]}
    thresholds = {"RssAnon": 5 * MiB, "VmRSS": 5 * MiB, "fds": 1.0, "Threads": 1.0}
    for key, threshold in thresholds.items():
        values = [f[key] for _, f in after]
        v = leak_verdict(
            [t for t, _ in after], values, resource=key, threshold_per_hour=threshold,
            window_s=args.window_s, min_windows=6, p_value_max=0.05,
        )  # fmt: skip
        out[key] = {
            "first": values[0], "last": values[-1], "min": min(values), "max": max(values),
            "verdict": v.verdict, "slope_per_hour": v.slope_per_hour, "p_value": v.p_value,
            "windows": v.windows,
        }  # fmt: skip
    missed = [e for e in status.get("events", []) if e["kind"] == "ticks_missed"]
    out["ticks_missed"] = sum(e["value"] for e in missed)
    out["samples"] = len(samples)
    out["lost_ratio"] = status.get("lost_ratio")
    return out


def markdown(fig: dict[str, Any], args: argparse.Namespace, duration_s: float) -> str:
    lines = [
        f"Service soak: {duration_s / 60:g} min at 1-s ticks, run {fig['run']} ({fig['status']}),"
        f" {fig['samples']} samples of the service process; verdicts after the first"
        f" {args.warmup_share:.0%}, {args.window_s:g}-s windows.",
        "",
        "| resource | after warm-up | min - max | slope per hour | verdict (p) |",
        "|---|---|---|---|---|",
    ]
    for key, unit in (("RssAnon", MiB), ("VmRSS", MiB), ("fds", 1), ("Threads", 1)):
        f = fig[key]
        suffix = " MiB" if unit == MiB else ""
        lines.append(
            f"| {key} | {f['first'] / unit:.1f}{suffix} -> {f['last'] / unit:.1f}{suffix} "
            f"| {f['min'] / unit:.1f} - {f['max'] / unit:.1f} "
            f"| {f['slope_per_hour'] / unit:+.2f}{suffix} | {f['verdict']} ({f['p_value']:.2g}) |"
        )
    lines += ["", f"Ticks missed: {fig['ticks_missed']:g}; queries lost: {fig['lost_ratio']}"]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
