"""`soak load`: one open-loop load run with a dnsperf-like summary, or --json.

It reads a scenario's `load:` section, so it sits above soak.config and is not part
of the load package, which the scenario models import.
"""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import ValidationError

from soak.commands.replay import replay_and_print, replay_cmd
from soak.errors import InputError
from soak.load.load_config import FLAT_OUT, LoadConfig
from soak.netsafety import check_allowed, parse_host_port
from soak.units import parse_rate_qps

_FLAGS = {
    "rate_qps": "--rate",
    "duration_s": "--duration",
    "timeout_s": "--timeout",
    "workers": "--workers",
    "flows": "--flows",
}


def _rate(text: str | None) -> float | None:
    """--rate: q/s, or `max` for flat out; 0 is refused rather than taken as flat out."""
    if text is None:
        return None
    if text.strip().lower() == FLAT_OUT:
        return 0.0
    try:
        rate = parse_rate_qps(text)
    except ValueError as exc:
        raise InputError(f"--rate: {exc}") from None
    if rate == 0:
        raise InputError(
            "--rate: 0 q/s sends nothing; for as fast as the server answers use --rate max"
        )
    return rate


def scenario_load(scenario: Path) -> tuple[LoadConfig, Path]:
    """A scenario's `load:` section and the directory its file names are relative to."""
    from soak.config import load_scenario  # the whole scenario model: only for --scenario

    sc = load_scenario(scenario)
    if sc.load is None:
        raise InputError(f"{scenario}: no `load:` section")
    return sc.load, sc.base_dir


def _config(
    queries: Path | None, scenario: Path | None, options: dict[str, object]
) -> tuple[LoadConfig, Path]:
    """The LoadConfig from --queries or a scenario's `load:` section, flags on top."""
    given = {k: v for k, v in options.items() if v is not None}
    if scenario is not None:
        section, base = scenario_load(scenario)
        data = section.model_dump(exclude_unset=True)
    elif queries is not None:
        data = {"mix": [{"name": "queries", "file": str(queries)}]}
        base = Path.cwd()
    else:
        raise InputError("give --queries FILE (or --scenario FILE with a `load:` section)")
    for key, value in given.items():  # --doh-method and --tls-*: into the scenario's sections
        old = data.get(key)
        data[key] = {**old, **value} if isinstance(value, dict) and isinstance(old, dict) else value
    try:
        return LoadConfig.model_validate(data), base
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        flag = _FLAGS.get(where) if where in given else None
        raise InputError(f"{flag or where}: {err['msg']}") from None


@click.command("load")
@click.option("--server", required=True, help="host:port of the DNS server")
@click.option("--queries", type=click.Path(path_type=Path), help="dnsperf-format query file")
@click.option("--scenario", type=click.Path(path_type=Path), help="take the mix from a scenario")
@click.option("--rate", default=None, help="queries per second, or `max` (flat out)")
@click.option("--duration", type=str, default=None, help="seconds (or 30s, 2m)")
@click.option("--protocol", type=click.Choice(["udp", "tcp", "dot", "doh"]), default=None)
@click.option(
    "--doh-method", type=click.Choice(["POST", "GET"]), default=None, help="DoH (default POST)"
)
@click.option(
    "--tls-resumption/--no-tls-resumption",
    default=None,
    help="DoT/DoH: resume TLS sessions on reconnect (default on)",
)
@click.option("--engine", type=click.Choice(["builtin", "dnsperf"]), default=None)
@click.option("--workers", type=int, default=None, help="worker processes (rate is shared)")
@click.option("--flows", type=int, default=None, help="UDP source ports or TCP connections")
@click.option("--timeout", type=float, default=None, help="seconds before a query is lost")
@click.option("--seed", type=int, default=None, help="seed for random names")
@click.option("--allow-target", "allow_targets", multiple=True, help="CIDR beyond loopback")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--replay", type=click.Path(path_type=Path), help="replay a capture (docs/replay.md)")
@click.option("--speed", default=None, help="--replay: 2 or 2x plays twice as fast")
@click.option("--loops", type=int, default=None, help="--replay: loops (default: to --duration)")
@click.option("--rewrite-zone", "rewrite_zones", multiple=True, help="--replay: fresh names")
def load_cmd(
    server: str,
    queries: Path | None,
    scenario: Path | None,
    rate: str | None,
    duration: str | None,
    protocol: str | None,
    doh_method: str | None,
    tls_resumption: bool | None,
    engine: str | None,
    workers: int | None,
    flows: int | None,
    timeout: float | None,
    seed: int | None,
    allow_targets: tuple[str, ...],
    as_json: bool,
    replay: Path | None,
    speed: str | None,
    loops: int | None,
    rewrite_zones: tuple[str, ...],
) -> None:
    """Open-loop DNS load against SERVER; exit 1 if nothing was answered."""
    host, port = parse_host_port(server)
    check_allowed(host, allow_targets)
    if replay is not None:
        replay_cmd(
            (host, port),
            {"file": replay, "speed": speed, "rate_qps": rate, "loops": loops},
            protocol,
            rewrite_zones,
            (duration, timeout, seed),
            as_json,
            workers,
        )
        return
    rate_qps = _rate(rate)
    if timeout is not None and timeout <= 0:
        raise InputError(f"--timeout must be positive: {timeout:g}")
    options: dict[str, object] = {
        "rate_qps": rate_qps,
        "duration_s": duration,
        "protocol": protocol,
        "engine": engine,
        "workers": workers,
        "flows": flows,
        "timeout_s": timeout,
        "seed": seed,
    }
    if doh_method is not None:
        options["doh"] = {"method": doh_method}
    if tls_resumption is not None:
        options["tls"] = {"resumption": tls_resumption}
    cfg, base = _config(queries, scenario, options)
    if cfg.replay is not None:  # a scenario's load.replay: its file is relative to it
        replay_and_print(
            cfg.replay.at(base), (host, port), cfg.duration_s, cfg.timeout_s, cfg.seed or 0, as_json
        )
        return
    from soak.plans.engine import make_plan, run_plan

    plan = make_plan(
        "load", cfg, (host, port), base_dir=base, allow_targets=allow_targets, as_json=as_json
    )
    run_plan(plan)
