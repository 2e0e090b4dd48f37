"""One load run from start to end with either engine (the builtin workers or dnsperf):
`soak load` and bench's sides."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from soak.errors import InputError, SoakError
from soak.load.generator import JOIN_GRACE_S, LoadRunner
from soak.load.load_config import LoadConfig
from soak.load.stats import LoadResult


def run_load(
    cfg: LoadConfig,
    server: tuple[str, int],
    duration_s: float,
    rate_qps: float,
    *,
    base_dir: Path | None = None,
    allow_targets: Sequence[str] = (),
) -> LoadResult:
    """One load run of duration_s at rate_qps (0: flat out) with either engine."""
    if duration_s <= 0:
        raise InputError(f"duration must be positive: {duration_s}")
    if rate_qps < 0:
        raise InputError(f"rate must not be negative: {rate_qps}")
    base = base_dir or Path.cwd()
    if cfg.engine == "dnsperf":
        from soak.load.dnsperf import run_dnsperf

        return run_dnsperf(cfg, server, duration_s, rate_qps, base, allow_targets)
    runner = LoadRunner(cfg, server, base_dir=base, allow_targets=allow_targets)
    runner.start(rate_qps, duration_s)
    try:
        runner.wait(duration_s + cfg.timeout_s + JOIN_GRACE_S + 10.0)
    finally:
        result = runner.stop()
    if runner.errors:
        raise SoakError("; ".join(runner.errors))
    result.duration_s = duration_s  # the schedule's seconds (the windows may add a part one)
    return result
