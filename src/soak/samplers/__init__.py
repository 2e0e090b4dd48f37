"""soak.samplers: what is read every tick. build_samplers() gives the list a TickRunner runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from soak.samplers.base import Sampler
from soak.samplers.selection import SamplersConfig
from soak.samplers.tick import TickRunner
from soak.targets.base import Running

__all__ = ["Sampler", "TickRunner", "build_samplers"]


def build_samplers(
    cfg: SamplersConfig,
    target: Callable[[], Running | None],
    *,
    load_source: object | None = None,
    proc_root: Path = Path("/proc"),
    http_client: httpx.Client | None = None,
    warmup_end_ns: Callable[[], int] | None = None,
    base_dir: Path | None = None,
    profiles_dir: Path | None = None,
) -> list[Sampler]:
    """The samplers the config asks for; bad config (an unset token variable) is InputError.

    target() gives the current Running at each tick (pid, ports and data_dir
    change when the target restarts); while it gives None, the `target`
    sampler records an event point every tick and the others record nothing.
    `base_dir`: where a header's relative `{file:PATH}` is (the scenario's directory).
    `profiles_dir`: where the pprof sampler keeps its captures (the run's data directory
    names it).
    Each API call and each dig probe is a sampler of its own (`http GET /x`,
    `dig name/A`).
    """
    from soak.samplers.api import HttpSampler, endpoint_name
    from soak.samplers.dig import DigSampler, probe_name
    from soak.samplers.files import FilesSampler
    from soak.samplers.host import HostSampler
    from soak.samplers.load import LoadSampler, LoadSource
    from soak.samplers.pprof import PprofSampler
    from soak.samplers.proc import ProcSampler
    from soak.samplers.prom import PromSampler
    from soak.samplers.server import ServerSampler
    from soak.samplers.smaps import SmapsSampler
    from soak.samplers.target import TargetSampler

    samplers: list[Sampler] = [TargetSampler(target)]
    if cfg.proc.enabled:
        samplers.append(ProcSampler(target, tree=cfg.proc.tree, proc_root=proc_root))
    if cfg.smaps is not None:
        samplers.append(SmapsSampler(cfg.smaps, target, proc_root=proc_root))
    if cfg.prom is not None:
        samplers.append(PromSampler(cfg.prom, target, client=http_client))
    if cfg.server is not None:
        samplers.append(ServerSampler(cfg.server, target, base_dir=base_dir))
    if cfg.pprof is not None:
        samplers.append(
            PprofSampler(
                cfg.pprof,
                target,
                client=http_client,
                warmup_end_ns=warmup_end_ns,
                base_dir=base_dir,
                profiles_dir=profiles_dir,
            )
        )
    # One sampler per API call and per probe: each has its own deadline in the tick,
    # so a slow endpoint costs its own sample only.
    for call in cfg.http:
        name = f"http {endpoint_name(call)}"
        samplers.append(
            HttpSampler([call], target, client=http_client, name=name, base_dir=base_dir)
        )
    for probe in cfg.dig:
        samplers.append(DigSampler([probe], target, name=f"dig {probe_name(probe)}"))
    if cfg.files is not None:
        samplers.append(FilesSampler(cfg.files, target))
    if cfg.host:
        samplers.append(
            HostSampler(generator_pids=lambda: _worker_pids(load_source), proc_root=proc_root)
        )
    if cfg.load and load_source is not None:
        if not callable(getattr(load_source, "take_window", None)):
            raise TypeError(f"load_source {load_source!r} has no take_window()")
        source: LoadSource = load_source  # type: ignore[assignment]
        samplers.append(LoadSampler(source))
    return samplers


def _worker_pids(load_source: object | None) -> list[int]:
    """The local load engine's worker processes (SupervisedLoad's runner); none for agents
    (their CPU is on their own nodes) or without load."""
    runner = getattr(load_source, "runner", None)
    pids = getattr(runner, "pids", None)
    return list(pids) if isinstance(pids, list) else []
