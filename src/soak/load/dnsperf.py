"""The dnsperf engine: run the dnsperf binary and read its summary into a LoadResult.

dnsperf takes one query file, so the mix must be one class without
expectations (it cannot check answers). Inline and random classes are written
to a temporary file first. dnsperf gives avg, min, max and stddev latency but
no percentiles; those stay None.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from soak.errors import InputError, SoakError
from soak.load.load_config import LoadConfig
from soak.load.queries import class_questions, parse_expect
from soak.load.stats import LoadResult

RANDOM_NAMES_MAX = 1_000_000

_NUM = r"([0-9.]+)"
_PATTERNS = {
    "sent": re.compile(r"Queries sent:\s+(\d+)"),
    "completed": re.compile(r"Queries completed:\s+(\d+)"),
    "lost": re.compile(r"Queries lost:\s+(\d+)"),
    "run_time_s": re.compile(rf"Run time \(s\):\s+{_NUM}"),
    "qps": re.compile(rf"Queries per second:\s+{_NUM}"),
    "avg_s": re.compile(rf"Average Latency \(s\):\s+{_NUM}"),
    "min_s": re.compile(rf"Average Latency \(s\):\s+[0-9.]+ \(min {_NUM}"),
    "max_s": re.compile(rf"Average Latency \(s\):\s+[0-9.]+ \(min [0-9.]+, max {_NUM}"),
    "stddev_s": re.compile(rf"Latency StdDev \(s\):\s+{_NUM}"),
}
_RCODES = re.compile(r"Response codes:\s+(.*)")
_RCODE_ITEM = re.compile(r"([A-Z0-9]+) (\d+) \(")


def parse_output(text: str) -> dict[str, Any]:
    """The numbers of dnsperf's "Statistics" block (the first one, not the connection one)."""
    block = text.split("Connection Statistics:")[0]
    out: dict[str, Any] = {}
    for key, pattern in _PATTERNS.items():
        m = pattern.search(block)
        if m:
            out[key] = (
                float(m.group(1)) if "." in m.group(1) or key.endswith("_s") else int(m.group(1))
            )
    if "sent" not in out:
        raise SoakError(f"dnsperf printed no statistics: {text.strip()[-300:]!r}")
    m = _RCODES.search(block)
    out["rcodes"] = {k: int(n) for k, n in _RCODE_ITEM.findall(m.group(1))} if m else {}
    return out


def result_from_output(parsed: dict[str, Any], target_rate: float, duration_s: float) -> LoadResult:
    def ms(key: str) -> float | None:
        value = parsed.get(key)
        if value is None or parsed.get("completed", 0) == 0:
            return None
        return round(value * 1000, 6)

    latency = {"min": ms("min_s"), "avg": ms("avg_s"), "p50": None, "p95": None, "p99": None}
    latency.update({"p999": None, "max": ms("max_s"), "stddev": ms("stddev_s")})
    # Rates over the asked duration: dnsperf's run time includes its final wait.
    run_s = duration_s
    result = LoadResult(
        engine="dnsperf",
        duration_s=run_s,
        target_rate=target_rate,
        sent=parsed["sent"],
        completed=parsed.get("completed", 0),
        lost=parsed.get("lost", 0),
        late=0,  # dnsperf drops replies after its timeout without counting them
        rcodes=parsed["rcodes"],
        latency_ms=latency,
        generator_bound=False,
        classes={},
    )
    if target_rate > 0 and result.sent < 0.995 * target_rate * run_s - 1:
        result.generator_bound = True
    return result


def query_file(cfg: LoadConfig, base_dir: Path, tmp: Path, count: int) -> Path:
    """The file dnsperf reads, written in its strict `name TYPE` form (a bare name is ours)."""
    if len(cfg.mix) != 1:
        raise InputError("the dnsperf engine takes one query class (no mix)")
    qc = cfg.mix[0]
    if parse_expect(qc) != (None, None):
        raise InputError("the dnsperf engine cannot check answers: drop `expect`")
    path = tmp / "queries.txt"
    if qc.random is not None:
        from soak.load.queries import RandomSource

        source = RandomSource(qc.random, cfg.seed or 0)
        with path.open("w") as f:
            for _ in range(min(count, RANDOM_NAMES_MAX)):
                q = source.next_question()
                label = q[1 : 1 + q[0]].decode()
                f.write(f"{label}.{qc.random.zone.rstrip('.')} {qc.random.type}\n")
        return path
    questions = class_questions(qc, base_dir)
    import dns.rdatatype

    path.write_text(
        "".join(
            f"{q.name} {dns.rdatatype.to_text(dns.rdatatype.RdataType(q.rdtype))}\n"
            for q in questions
        )
    )
    return path


def dnsperf_argv(
    cfg: LoadConfig, host: str, port: int, path: Path, duration_s: float, rate_qps: float
) -> list[str]:
    binary = shutil.which("dnsperf")
    if binary is None:
        raise InputError("the dnsperf engine needs the dnsperf binary on PATH")
    argv = [binary, "-s", host, "-p", str(port), "-d", str(path), "-l", f"{duration_s:g}"]
    argv += ["-m", cfg.protocol, "-t", f"{cfg.timeout_s:g}", "-c", str(cfg.flows)]
    argv += ["-T", str(cfg.workers), "-q", str(cfg.max_outstanding)]
    if cfg.protocol == "doh":
        name = cfg.tls.server_name or host
        uri = f"https://{name if ':' not in name else f'[{name}]'}:{port}{cfg.doh.path}"
        argv += ["-O", f"doh-uri={uri}", "-O", f"doh-method={cfg.doh.method}"]
    if rate_qps > 0:  # dnsperf takes whole queries a second ("invalid max_qps: 1062.5")
        argv += ["-Q", str(max(1, round(rate_qps)))]
    return argv


def run_dnsperf(
    cfg: LoadConfig,
    server: tuple[str, int],
    duration_s: float,
    rate_qps: float,
    base_dir: Path,
    allow_targets: Sequence[str] = (),
) -> LoadResult:
    from soak.netsafety import check_allowed

    host = check_allowed(server[0], tuple(allow_targets))
    with tempfile.TemporaryDirectory(prefix="soak-dnsperf-") as tmp:
        count = int(rate_qps * duration_s) + 1 if rate_qps > 0 else RANDOM_NAMES_MAX
        path = query_file(cfg, base_dir, Path(tmp), count)
        argv = dnsperf_argv(cfg, host, server[1], path, duration_s, rate_qps)
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=duration_s + cfg.timeout_s + 30
            )
        except subprocess.TimeoutExpired as exc:
            raise SoakError(f"dnsperf did not finish in {exc.timeout:.0f} s") from None
    if proc.returncode != 0 and "Queries sent" not in proc.stdout:
        raise SoakError(f"dnsperf failed ({proc.returncode}): {proc.stderr.strip()[-300:]}")
    return result_from_output(parse_output(proc.stdout), rate_qps, duration_s)
