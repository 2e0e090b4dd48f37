"""Load agents (Docker Swarm and local) against dnsperf -T N: aggregate q/s, CPU per answer.

One unbound (2 threads, local-data answers) on 127.0.0.1 for the whole bench
and the six-line query file of bench/load_vs_dnsperf.py (DEFAULT_QUERIES of
tests/support/servers.py). For N in --counts, each of --runs rounds runs, one
after the other:

- fixed rate: `soak load --scenario` with N swarm agents, then N local agents,
  at --rate q/s in total: asked, achieved (the agents' sent / duration, summed),
  error against asked, each agent's sent;
- flat out: N swarm agents, N local agents (`rate_qps: max`), dnsperf -c N -T N:
  q/s, answers, lost, CPU of the generator and of unbound per answer.

Rounds alternate the cases so that a busy minute on a shared machine hits them
alike; the tables give medians. CPU (user + system, seconds):

- agents: every process of each agent (`soak agent` and its worker processes),
  found by command line (`agent --segment ... --server 127.0.0.1:PORT`) and
  /proc children, read every --poll-s: the sum of each process's last reading
  (so at most --poll-s of each process's end is missed, alike for both engines);
  swarm agents also by their containers' cgroup (cpuacct.usage), read alike;
- coordinator: the `soak load` process (this process's waited-for children, less
  the local agents);
- docker: dockerd + containerd + the agents' containerd shims (dockerd is shared
  with anything else using docker meanwhile);
- dnsperf: its own (waited-for child); unbound: /proc/PID/stat, before and after;
- machine: /proc/stat busy time over the case, as a share of all cores.

    PYTHONPATH=src .venv/bin/python bench/agents_vs_dnsperf.py [--runs 3] [--duration 10]
        [--rates 20000,100000] [--counts 1,2,3] [--json out.json] [--summary out.json]
    PYTHONPATH=src .venv/bin/python bench/agents_vs_dnsperf.py --smoke   # 1 agent, 3-s cases

One round with the defaults takes about 4 minutes (each fixed rate about 1.3
of them). The local agents run this interpreter's `soak` (with
PYTHONPATH=src, the tree's); it prints whether their UDP loop is the compiled
one, as the image's is (a tree without the built _fastudp module measures the
pure-Python loop instead). Needs an active swarm on this engine (this bench
never creates or leaves one) and the image soak/agent:latest (make
agent-image). Every service it causes (soak.owner = this host and the `soak
load` pid) is removed, also on error.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.agents import AGENT_IMAGE, agents_scenario  # noqa: E402
from tests.support.servers import unbound, write_queries  # noqa: E402

from soak.clock import ns_to_s  # noqa: E402
from soak.docker_client import engine as docker_client  # noqa: E402
from soak.hostproc import machine_cpu  # noqa: E402
from soak.labels import LABEL_OWNER  # noqa: E402
from soak.procfs import children, cpu_s, read_cgroup, read_stat  # noqa: E402

IMAGE = AGENT_IMAGE  # what `make agent-image` builds
SOAK = str(Path(sys.executable).parent / "soak")
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
TICKS_S = os.sysconf("SC_CLK_TCK")


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def children_cpu_s() -> float:
    t = os.times()
    return t.children_user + t.children_system


def comm_pids(names: set[str]) -> list[int]:
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if Path(entry.path, "comm").read_text().strip() in names:
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


def cgroup_usage_path(pid: int) -> Path | None:
    """The cpuacct.usage file of a process's container (None outside a container)."""
    for line in read_cgroup(pid).splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(",") and path.startswith("/docker/"):
            return CPUACCT / path.lstrip("/") / "cpuacct.usage"
    return None


@dataclass
class AgentCpu:
    """Polls the CPU of the agents that load 127.0.0.1:port, in a thread."""

    port: int
    poll_s: float
    last_s: dict[tuple[int, int], float] = field(default_factory=dict)  # (pid, start) -> CPU
    roots: dict[int, int] = field(default_factory=dict)  # agent pid -> start ticks
    shims: dict[int, float] = field(default_factory=dict)  # shim pid -> first CPU
    shim_last: dict[int, float] = field(default_factory=dict)
    cgroups: dict[Path, int] = field(default_factory=dict)  # cpuacct.usage -> last ns
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def _is_agent(self, pid: int) -> bool:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        server = f"127.0.0.1:{self.port}".encode()
        return b"agent" in argv and b"--segment" in argv and server in argv

    def _scan(self) -> None:
        for entry in os.scandir("/proc"):
            pid = int(entry.name) if entry.name.isdigit() else 0
            if pid and pid not in self.roots and self._is_agent(pid):
                stat = read_stat(pid)
                self.roots[pid] = stat.starttime_ticks
                self._add_container(pid, stat.ppid)

    def _add_container(self, pid: int, ppid: int) -> None:
        path = cgroup_usage_path(pid)
        if path is not None:
            self.cgroups.setdefault(path, 0)
            first = cpu_s(ppid)
            if first is not None:  # the agent's parent is its containerd shim
                self.shims[ppid] = first

    def _tree(self, pid: int) -> list[int]:
        out = [pid]
        for kid in children(pid):
            out += self._tree(kid)
        return out

    def _read(self) -> None:
        for root in list(self.roots):
            for pid in self._tree(root):
                try:
                    stat = read_stat(pid)
                except (OSError, ValueError):
                    continue
                self.last_s[(pid, stat.starttime_ticks)] = stat.cpu_s
        for path in self.cgroups:
            try:
                self.cgroups[path] = int(path.read_text())
            except (OSError, ValueError):
                continue  # the container ended: its last reading stays
        for pid in self.shims:
            now = cpu_s(pid)
            if now is not None:
                self.shim_last[pid] = now

    def run(self, count: int) -> None:
        deadline = time.monotonic()
        while not self._stop.is_set():
            try:
                if len(self.roots) < count:
                    self._scan()
                self._read()
            except OSError:
                self.errors += 1  # counted: a reading missed, not hidden
            deadline += self.poll_s
            self._stop.wait(max(0.0, deadline - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()

    @property
    def agents_cpu_s(self) -> float:
        return sum(self.last_s.values())

    @property
    def cgroup_cpu_s(self) -> float:
        return ns_to_s(sum(self.cgroups.values()))

    @property
    def shim_cpu_s(self) -> float:
        return sum(self.shim_last.get(p, v) - v for p, v in self.shims.items())

    @property
    def start_spread_s(self) -> float:
        starts = list(self.roots.values())
        return (max(starts) - min(starts)) / TICKS_S if starts else 0.0


@dataclass
class Meters:
    """CPU counters read before and after a case: unbound, docker daemons, the machine."""

    server_pid: int
    daemon_pids: list[int]

    def read(self) -> dict[str, float]:
        machine = machine_cpu()
        return {
            "server": cpu_s(self.server_pid) or 0.0,
            "daemons": sum(cpu_s(p) or 0.0 for p in self.daemon_pids),
            "children": children_cpu_s(),
            "busy": machine.busy_s if machine else 0.0,
            "total": machine.total_s if machine else 0.0,
            "wall": time.monotonic(),
        }

    @staticmethod
    def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        d = {k: after[k] - before[k] for k in before}
        d["machine_busy"] = d.pop("busy") / d.pop("total") if d["total"] else 0.0
        return d


def remove_services(client: Any, coordinator_pid: int) -> int:
    """Remove every service this coordinator made (by its soak.owner label)."""
    owner = f"{LABEL_OWNER}={socket.gethostname()}:{coordinator_pid}"
    found = client.services.list(filters={"label": owner})
    for service in found:
        service.remove()
    return len(found)


def run_agents(
    case_dir: Path, port: int, engine: str, count: int, rate: float, args: Any, env: dict[str, Any]
) -> dict[str, Any]:
    """One `soak load` with `count` agents of `engine`; its result with the CPU figures."""
    case_dir.mkdir(parents=True)
    agents: dict[str, Any] = {"count": count, "engine": engine}
    if engine == "swarm":
        agents["image"] = IMAGE
    load = {
        "rate_qps": rate if rate > 0 else "max",
        "duration_s": args.duration,
        "mix": [{"name": "queries", "file": str(env["qfile"])}],
        "agents": agents,
    }
    path = agents_scenario(case_dir, f"agents-{engine}-{count}", port, load)
    argv = [SOAK, "load", "--server", f"127.0.0.1:{port}", "--scenario", str(path), "--json"]
    tracker = AgentCpu(port, args.poll_s)
    meters: Meters = env["meters"]
    before = meters.read()
    thread = threading.Thread(target=tracker.run, args=(count,), daemon=True)
    thread.start()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=args.duration + 180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        tracker.stop()
        thread.join()
        left = remove_services(env["client"], proc.pid)
    d = Meters.delta(before, meters.read())
    if proc.returncode != 0 or left:
        raise SystemExit(f"soak load ({engine}, {count}) exit {proc.returncode}: {err.strip()}")
    res = json.loads(out)
    gen = tracker.agents_cpu_s
    coordinator = d["children"] - (gen if engine == "local" else 0.0)
    return {
        "engine": engine,
        "count": count,
        "rate": rate,
        "duration_s": args.duration,
        "sent": res["sent"],
        "completed": res["completed"],
        "lost": res["lost"],
        "qps": res["completed"] / args.duration,
        "sent_qps": res["sent"] / args.duration,
        "per_agent_sent": [a["sent"] for a in res["per_agent"]],
        "gen_cpu_s": gen,
        "cgroup_cpu_s": tracker.cgroup_cpu_s if engine == "swarm" else None,
        "coordinator_cpu_s": coordinator,
        "docker_cpu_s": d["daemons"] + tracker.shim_cpu_s,
        "server_cpu_s": d["server"],
        "machine_busy": d["machine_busy"],
        "wall_s": d["wall"],
        "start_spread_s": tracker.start_spread_s,
        "agents_found": len(tracker.roots),
        "poll_errors": tracker.errors,
        "notes": res.get("notes", []),
    }


def run_case(
    case_dir: Path,
    port: int,
    engine: str,
    count: int,
    rate: float,
    args: Any,
    env: dict[str, Any],
    failures: list[str],
) -> dict[str, Any]:
    """run_agents, once more if it fails (the failure is kept and printed at the end)."""
    try:
        return run_agents(case_dir, port, engine, count, rate, args, env)
    except SystemExit as exc:
        failures.append(str(exc))
        print(f"failed, run again: {exc}", flush=True)
        return run_agents(
            case_dir.with_name(case_dir.name + "-again"), port, engine, count, rate, args, env
        )


def run_dnsperf(port: int, count: int, args: Any, env: dict[str, Any]) -> dict[str, Any]:
    meters: Meters = env["meters"]
    before = meters.read()
    argv = ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", str(env["qfile"])]
    argv += ["-l", f"{args.duration:g}", "-c", str(count), "-T", str(count)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    d = Meters.delta(before, meters.read())

    def num(label: str) -> float:
        m = re.search(rf"{label}:\s+([0-9.]+)", out)
        if m is None:
            raise SystemExit(f"dnsperf printed no {label!r}:\n{out}")
        return float(m.group(1))

    completed = int(num("Queries completed"))
    return {
        "engine": "dnsperf",
        "count": count,
        "rate": 0,
        "duration_s": args.duration,
        "sent": int(num("Queries sent")),
        "completed": completed,
        "lost": int(num("Queries lost")),
        "qps": num("Queries per second"),
        "gen_cpu_s": d["children"],
        "server_cpu_s": d["server"],
        "docker_cpu_s": d["daemons"],
        "machine_busy": d["machine_busy"],
        "wall_s": d["wall"],
    }


def us_per_answer(r: dict[str, Any], key: str) -> float:
    return r[key] / r["completed"] * 1e6 if r["completed"] else float("nan")


def pick(results: list[dict[str, Any]], engine: str, count: int, rate: float) -> list[dict]:
    """The runs of one case (rate 0: flat out)."""
    return [r for r in results if (r["engine"], r["count"], r["rate"]) == (engine, count, rate)]


def med(rows: list[dict[str, Any]], fn: Any) -> float:
    return statistics.median(fn(r) for r in rows)


def fixed_table(results: list[dict[str, Any]], counts: list[int], rate: float) -> None:
    print(f"\nFixed rate, {rate:,.0f} q/s asked in total (medians; error: median, worst)")
    print("| agents | engine | asked q/s | achieved sum q/s | error | worst | per-agent sent |")
    print("|---|---|---|---|---|---|---|")
    for n in counts:
        for engine in ("swarm", "local"):
            rows = pick(results, engine, n, rate)
            errs = [(r["sent_qps"] - rate) / rate * 100 for r in rows]
            mid = sorted(rows, key=lambda r: r["sent_qps"])[len(rows) // 2]
            per_agent = ", ".join(f"{s:,}" for s in mid["per_agent_sent"])
            print(
                f"| {n} | {engine} | {rate:,.0f} | {med(rows, lambda r: r['sent_qps']):,.1f} "
                f"| {statistics.median(errs):+.3f}% | {max(errs, key=abs):+.3f}% | {per_agent} |"
            )


def flat_table(results: list[dict[str, Any]], counts: list[int]) -> None:
    print("\nFlat out (medians; CPU per answer in µs; busy: the machine's cores, all users)")
    print(
        "| N | generator | q/s | answers | lost | generator CPU s | unbound CPU s "
        "| generator µs/answer | unbound µs/answer | coordinator CPU s | docker CPU s "
        "| start spread s | machine busy |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in counts:
        for engine in ("swarm", "local", "dnsperf"):
            rows = pick(results, engine, n, 0)

            def m(fn: Any, fmt: str, rows: list[dict[str, Any]] = rows) -> str:
                return format(med(rows, fn), fmt)

            cells = [
                m(lambda r: r["qps"], ",.0f"),
                m(lambda r: r["completed"], ",.0f"),
                m(lambda r: r["lost"], ",.0f"),
                m(lambda r: r["gen_cpu_s"], ".2f"),
                m(lambda r: r["server_cpu_s"], ".2f"),
                m(lambda r: us_per_answer(r, "gen_cpu_s"), ".2f"),
                m(lambda r: us_per_answer(r, "server_cpu_s"), ".2f"),
                m(lambda r: r.get("coordinator_cpu_s") or 0.0, ".2f"),
                m(lambda r: r["docker_cpu_s"], ".2f"),
                m(lambda r: r.get("start_spread_s") or 0.0, ".2f"),
                m(lambda r: r["machine_busy"] * 100, ".0f") + "%",
            ]
            name = f"dnsperf -T {n}" if engine == "dnsperf" else engine
            print(f"| {n} | {name} | {' | '.join(cells)} |")


def all_in_us(r: dict[str, Any]) -> float:
    """Generator CPU per answer with the coordinator's and the docker daemons'."""
    cpu = r["gen_cpu_s"] + r["coordinator_cpu_s"] + r["docker_cpu_s"]
    return cpu / r["completed"] * 1e6


def summary(results: list[dict[str, Any]], counts: list[int], rates: list[float]) -> None:
    for rate in rates:
        fixed_table(results, counts, rate)
    flat_table(results, counts)
    ratios(results, counts, rates)


def ratios(results: list[dict[str, Any]], counts: list[int], rates: list[float]) -> None:
    print()
    for n in counts:
        swarm, local = pick(results, "swarm", n, 0), pick(results, "local", n, 0)
        dnsperf = pick(results, "dnsperf", n, 0)
        per_answer = [us_per_answer(r, "gen_cpu_s") for r in local]
        l_us = statistics.median(per_answer)
        s_us = med(swarm, lambda r: us_per_answer(r, "gen_cpu_s"))
        d_us = med(dnsperf, lambda r: us_per_answer(r, "gen_cpu_s"))
        s_qps, l_qps = med(swarm, lambda r: r["qps"]), med(local, lambda r: r["qps"])
        d_qps = med(dnsperf, lambda r: r["qps"])
        noise = (max(per_answer) - min(per_answer)) / l_us * 100
        cg = [r["cgroup_cpu_s"] / r["gen_cpu_s"] for r in swarm if r["gen_cpu_s"]]
        all_in = med(swarm, all_in_us) / med(local, all_in_us)
        paired = ", ".join(
            f"{us_per_answer(a, 'gen_cpu_s') / us_per_answer(b, 'gen_cpu_s'):.2f}"
            for a, b in zip(swarm, local, strict=True)
        )
        print(
            f"N={n}: swarm/local CPU per answer: {s_us / l_us:.2f} (goal <= 1.05; local's runs "
            f"spread {noise:.0f}%); swarm/local q/s: {s_qps / l_qps:.2f}; "
            f"swarm/dnsperf q/s: {s_qps / d_qps:.2f}, CPU per answer: {s_us / d_us:.2f}; "
            f"local/dnsperf CPU per answer: {l_us / d_us:.2f}; "
            f"swarm cgroup/proc CPU: {statistics.median(cg):.3f}"
        )
        print(f"  swarm/local by round: {paired}; with coordinator and docker: {all_in:.2f}")
    for rate in rates:
        errs = [abs(r["sent_qps"] - rate) / rate * 100 for r in results if r["rate"] == rate]
        worst = max(errs)
        print(f"fixed {rate:,.0f} q/s: worst error of the agents' sum {worst:.3f}% (goal <= 1%)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--rates", default="20000,100000", help="fixed rates, q/s in total")
    ap.add_argument("--counts", default="1,2,3")
    ap.add_argument("--poll-s", type=float, default=0.05)
    ap.add_argument("--json", type=Path, help="write every run's figures here")
    ap.add_argument("--summary", type=Path, help="only print the tables of a --json file")
    ap.add_argument("--smoke", action="store_true", help="1 agent, 3-s cases: that it runs")
    args = ap.parse_args()
    if args.smoke:  # 3 s: an agent that starts late on a busy machine still has a window
        args.runs, args.duration, args.rates, args.counts = 1, 3.0, "2000", "1"
    counts = [int(c) for c in args.counts.split(",")]
    rates = [float(r) for r in args.rates.split(",")]
    if args.summary:
        summary(json.loads(args.summary.read_text()), counts, rates)
        return
    failures: list[str] = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally blocks run
    client = docker_client()
    swarm = (client.info().get("Swarm") or {}).get("LocalNodeState")
    if swarm != "active":
        raise SystemExit(f"this engine's swarm is {swarm!r}: this bench needs an active one")
    client.images.get(IMAGE)
    loop = "compiled" if importlib.util.find_spec("soak.load._fastudp") else "Python (not built)"
    print(f"local agents' UDP loop: {loop}")
    start = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(f"{start}, {os.cpu_count()} CPUs, load average at start: {load_average()}", flush=True)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="soak-bench-agents-") as tmp:
        qfile = write_queries(Path(tmp))
        with unbound(Path(tmp), threads=2) as server:
            meters = Meters(server.pid, comm_pids({"dockerd", "containerd"}))
            env = {"qfile": qfile, "meters": meters, "client": client}
            print(f"unbound (2 threads) pid {server.pid} on 127.0.0.1:{server.port}", flush=True)
            for i in range(args.runs):
                for n in counts:
                    cases = [(e, rate) for rate in rates for e in ("swarm", "local")]
                    for engine, rate in [*cases, ("swarm", 0.0), ("local", 0.0)]:
                        case = Path(tmp) / f"r{i}-{engine}-{n}-{rate:g}"
                        r = run_case(case, server.port, engine, n, rate, args, env, failures)
                        results.append(r)
                        show(i, r)
                    results.append(run_dnsperf(server.port, n, args, env))
                    show(i, results[-1])
    print(f"load average at end: {load_average()}")
    summary(results, counts, rates)
    print(f"cases failed and run again: {len(failures)}", *failures, sep="\n  ")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


def show(i: int, r: dict[str, Any]) -> None:
    what = f"{r['rate']:,.0f} q/s" if r["rate"] > 0 else "flat out"
    print(
        f"run {i + 1} {r['engine']:>7} x{r['count']} {what:>11}: sent {r['sent']:,} answered "
        f"{r['completed']:,} lost {r['lost']:,} ({r['qps']:,.0f} q/s); generator CPU "
        f"{r['gen_cpu_s']:.2f} s ({us_per_answer(r, 'gen_cpu_s'):.2f} µs/answer), unbound "
        f"{r['server_cpu_s']:.2f} s, machine busy {r['machine_busy'] * 100:.0f}%, "
        f"load {load_average()}",
        flush=True,
    )


if __name__ == "__main__":
    main()
