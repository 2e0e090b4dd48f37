"""Running the real `soak` command in tests: a subprocess, its data directory, its store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support.procs import cmdlines
from tests.support.servers import free_port
from tests.support.soaks import ROOT, last_json, soak_argv
from tests.support.waiting import wait_for

DEMO = ROOT / "scenarios" / "pdns-recursor-dnsmasq.yaml"

# 1-s ticks and short leak windows, so a minute of soak has verdicts to give. A rise from
# the warm-up's end still waits the start-up wait (24 windows, 2 min) and a run of a
# minute cannot judge it: these are exploratory runs, which `criteria.not_judged: pass`
# lets pass with such a criterion named (tests/e2e/test_soak_not_judged.py tests the
# rule itself).
QUICK = [
    "--set", "samplers.interval_s=1",
    "--set", "leaks.window_s=5s",
    "--set", "leaks.interval_s=5s",
    "--set", "leaks.min_windows=3",
    "--set", "criteria.not_judged=pass",
]  # fmt: skip


def upstream_rest(rate_qps: int, duration: str) -> str:
    """The rest of a scenario (YAML) whose target, a dnsmasq named `upstream` answering
    every name, its argv given: its port and readiness, a random-name load, one phase."""
    return f"""  ports:
    dns: {{protocol: both}}
  ready:
    probes:
      - {{kind: dns, name: anything.example, answer: 192.0.2.1}}
load:
  rate_qps: {rate_qps}
  mix:
    - {{name: any, random: {{zone: x.example}}}}
phases:
  - {{name: steady, duration_s: {duration}}}
"""


def foreground_json_argv(scenario: Path, data: Path) -> list[str]:
    """`soak start SCENARIO --foreground --json` into the data directory `data`."""
    return soak_argv("start", str(scenario), "--foreground", "--json", "--data-dir", str(data))


def scenario_in_foreground(
    tmp_path: Path, name: str, text: str, stderr: int = subprocess.DEVNULL
) -> tuple[subprocess.Popen[str], Path]:
    """The scenario `text` (as NAME.yaml in tmp_path) started in the foreground into the
    data directory tmp_path/data, its stdout dropped: the process and the directory."""
    scenario = tmp_path / f"{name}.yaml"
    scenario.write_text(text)
    data = tmp_path / "data"
    argv = soak_argv("start", str(scenario), "--foreground", "--data-dir", str(data))
    fg = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, text=True, cwd=ROOT)
    return fg, data


def demo_in_foreground(data: Path) -> subprocess.Popen[bytes]:
    """The demo scenario as a 5-minute foreground run into `data`, its output dropped: a
    run to look at (status, a kill) while it goes."""
    argv = soak_argv(
        "start", str(DEMO), "--foreground", "--duration", "5m", *QUICK, "--data-dir", str(data)
    )
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)


def run_soak(
    *args: str, env: dict[str, str] | None = None, timeout_s: float = 240.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        soak_argv(*args),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def soak_passes(scenario: Path, data: Path, duration: str, *args: str) -> dict[str, Any]:
    """`soak start SCENARIO --foreground --json` into `data`: exit 0, status `passed`; the
    run's status. `args`: more options, e.g. `--set` items."""
    proc = run_soak(
        "start", str(scenario), "--foreground", "--duration", duration, *args,
        "--data-dir", str(data), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    status: dict[str, Any] = last_json(proc.stdout)
    assert status["status"] == "passed", status["message"]
    return status


def processes_under(path: Path) -> list[str]:
    """Command lines of live processes that mention `path` (a run's files): none should be."""
    found = []
    for pid, raw in cmdlines():
        cmd = raw.replace(b"\0", b" ").decode(errors="replace")
        if str(path) in cmd:
            found.append(f"{pid}: {cmd.strip()}")
    return found


TOKEN = "e2e-token"


def service_place(tmp_path: Path) -> tuple[Path, int, str]:
    """(data directory, made; a free port; the service's URL on it) for a test's service."""
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    return data, port, f"http://127.0.0.1:{port}"


@contextmanager
def service(data: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    log = open(data.parent / f"serve-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        soak_argv("serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data)),
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True,
        env={**os.environ, "SOAK_TOKEN": TOKEN},
    )  # fmt: skip
    try:
        wait_for(lambda: _healthy(port), 20.0, "the service answers /healthz")
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        log.close()


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def status(port: int, run_id: str) -> dict[str, Any]:
    r = httpx.get(
        f"http://127.0.0.1:{port}/runs/{run_id}",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10.0,
    )
    r.raise_for_status()
    result: dict[str, Any] = r.json()
    return result


def ran_for(port: int, run_id: str, seconds: float) -> dict[str, Any]:
    """The status of the service's run once it is running and has run `seconds`."""
    found: dict[str, Any] = wait_for(
        lambda: (
            (s := status(port, run_id))["status"] == "running"
            and (s["elapsed_s"] or 0) > seconds
            and s
        ),
        60.0,
        f"the run has run {seconds:g} s",
    )
    return found


def ends_passed(
    port: int, run_id: str, timeout_s: float = 90.0, unless: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The status of the service's run once it has ended, which it must have passed, or
    failed by the criteria named in `unless` alone."""
    final = ended(port, run_id, timeout_s)
    failed = {c["name"] for c in final.get("criteria", []) if not c["ok"]}
    if final["status"] != "failed" or not failed or not failed <= set(unless):
        assert final["status"] == "passed", (final["message"], final["events"][-5:])
    return final


def kinds(st: dict[str, Any]) -> list[str]:
    return [e["kind"] for e in st["events"]]


def submitted(url: str, *args: str) -> str:
    """`soak start ARGS --server URL` with the service's token: the run's id."""
    proc = run_soak("start", *args, "--server", url, env={"SOAK_TOKEN": TOKEN})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def ended(port: int, run_id: str, timeout_s: float) -> dict[str, Any]:
    """The status of the service's run once it is neither pending nor running."""
    final: dict[str, Any] = wait_for(
        lambda: (s := status(port, run_id))["status"] not in ("pending", "running") and s,
        timeout_s,
        "the run ends",
    )
    return final


def resumed(port: int, run_id: str, timeout_s: float = 30.0) -> dict[str, Any]:
    """The status of the service's run once a new service has resumed it (its gap event)."""
    found: dict[str, Any] = wait_for(
        lambda: "gap" in kinds(s := status(port, run_id)) and s, timeout_s, "the run resumes"
    )
    return found


def swap_interrupted(final: dict[str, Any], data: Path, run_id: str, message: str) -> None:
    """The run ended `failed` for the service stopped in its swap (`message` its start),
    the swap's record `interrupted`, nothing of the run left running."""
    from soak.runs.layout import DataDir

    assert final["status"] == "failed"
    assert final["message"].startswith(message), final["message"]
    (swap,) = json.loads((DataDir(data).run_dir(run_id) / "swaps.json").read_text())
    assert swap["status"] == "interrupted"
    assert processes_under(data) == []
