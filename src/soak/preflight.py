"""What a scenario refers to, checked in full before anything starts.

A run that starts its helpers and then finds a bad line in a query file leaves
processes to stop and a user waiting for nothing. These checks read every file a
scenario names (query files parsed line by line, templates read as text) and weigh
its rates against what the load engine can send, so that bad input is one line and
exit 2 before the first process starts. They also look for what a target needs
(a binary on PATH or at its path, a docker image in the local engine, a fixed host
port that is free, an address that `allow_targets` lets soak send to).

One pre-flight for every path: `soak validate`, `soak start --foreground`, the
service's `POST /runs` (422 with the line, no record) and `soak upgrade`. A failure
after it (a target that exits, a port taken in between) is a run that ends `error`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from soak.config import Scenario
from soak.config.upgrade import swapped_targets
from soak.errors import InputError
from soak.load.load_config import LoadConfig
from soak.netsafety import check_allowed
from soak.placeholders import (
    Placeholders,
    check_text,
    fill_services,
    render,
    reveal,
    services_named,
)
from soak.targets.specs import DockerTarget, ExternalTarget, ProcessTarget, TargetConfig
from soak.traffic.capture_config import CaptureConfig
from soak.traffic.dnstap import SOCKET_PATH_MAX_BYTES
from soak.traffic.replay_config import ReplayConfig

# What one load worker can send at most, by protocol: above the best this engine has
# measured (docs/benchmarks.md, "compiled UDP loop": 222,806 q/s over UDP and 96,509 q/s
# over TCP with one worker against a server answering from cache, on two cores). A
# rate above `workers` times this cannot be sent; the run would end with a
# `lost_ratio` failure that is the generator's, not the server's.
# DoT and DoH ride on TCP and add TLS (and HTTP/2): the TCP figure bounds them too.
WORKER_MAX_QPS = {"udp": 250_000.0, "tcp": 100_000.0, "dot": 100_000.0, "doh": 100_000.0}


def check_scenario(scenario: Scenario, *, secrets: bool = True, reader: str | None = None) -> None:
    """Raise InputError (one line) for the first problem found; read-only.

    `secrets=False`: the secret references are not read here (a client submitting to a
    service: they are the service's environment and files, which it checks itself);
    `reader`: the process that reads them, named when one cannot be (`soak serve`)."""
    check_placeholder_syntax(scenario)
    check_sampler_agent(scenario)
    if secrets:
        check_secrets(scenario, reader)
    if scenario.load is not None and scenario.load.replay is not None:
        check_replay(scenario, scenario.load.replay)
    if scenario.load is not None:
        check_agents(scenario.load)
        check_load(scenario.load, scenario.base_dir, phase_rates(scenario))
    check_targets([*scenario.services, scenario.target], scenario.base_dir, scenario.allow_targets)
    check_swapped_targets(scenario)
    check_placeholders(scenario)
    if scenario.capture is not None:
        check_capture(scenario.capture, scenario.base_dir)


def check_targets(
    targets: Sequence[TargetConfig], base_dir: Path, allow_targets: Sequence[str]
) -> None:
    """Every target's address, files, binary or image, and fixed host ports."""
    for target in targets:
        check_allowed(target.host, tuple(allow_targets))
        check_target_files(target, base_dir)
        if isinstance(target, ProcessTarget):
            check_binary(target, base_dir)
        elif isinstance(target, DockerTarget):
            check_image(target)
        if not isinstance(target, ExternalTarget):
            check_fixed_ports(target)


def check_swapped_targets(scenario: Scenario) -> None:
    """Each version an `upgrade:` swap brings in, as its target is checked: a binary or
    image missing is found before the run, not when its swap comes hours into it."""
    if scenario.upgrade is None:
        return
    swapped = swapped_targets(scenario.upgrade, scenario.target)
    for i, target in enumerate(swapped):
        try:
            check_targets([target], scenario.base_dir, scenario.allow_targets)
        except InputError as exc:
            raise InputError(f"upgrade.swaps.{i}.target: {exc}") from None


def check_agents(load: LoadConfig) -> None:
    """`load.agents` in a soak run: enough rate to split, the engine there, its image."""
    agents = load.agents
    if agents is None:
        return
    if 0 < load.rate_qps * 1000 < agents.count:
        raise InputError(
            f"load.agents: rate {load.rate_qps:g} q/s is too small for {agents.count} agents"
        )
    from soak.agents.engines import check_engine

    check_engine(agents)


def check_sampler_agent(scenario: Scenario) -> None:
    """`samplers.agent` samples a target this machine does not start, on its engine."""
    agent = scenario.samplers.agent
    if agent is None:
        return
    if scenario.target.runtime != "external":
        raise InputError(
            "samplers.agent: only for a target on another node (`target.runtime: external`); "
            f"a {scenario.target.runtime} target runs here and is sampled here"
        )
    from soak.agents.engines import check_engine

    check_engine(agent.engine_config())


def refuse_agents(load: LoadConfig, who: str) -> None:
    """`load.agents` is run by `soak load` only so far: elsewhere it is refused, not ignored."""
    if load.agents is not None:
        raise InputError(
            f"load.agents: {who} does not start load agents yet; `soak load --scenario` does "
            "(docs/scale.md)"
        )


def phase_rates(scenario: Scenario) -> list[tuple[str, float]]:
    """(where, q/s) of every phase: its own rate, or the load's."""
    assert scenario.load is not None
    return [
        (f"phases.{i}.rate_qps", p.rate_qps)
        if p.rate_qps is not None
        else ("load.rate_qps", scenario.load.rate_qps)
        for i, p in enumerate(scenario.phases)
    ]


def check_replay(scenario: Scenario, replay: ReplayConfig) -> None:
    """What a soak run's replay cannot do (docs/replay.md), then the capture read and
    checked (InputError: not a capture, truncated, no queries)."""
    from soak.load.replay import load_replay

    if scenario.load is not None and scenario.load.agents is not None:
        raise InputError("load.replay: a replay plays from the run's own process; drop load.agents")
    for i, phase in enumerate(scenario.phases):
        if phase.rate_qps is not None:
            raise InputError(
                f"phases.{i}.rate_qps: a replay keeps its capture's timing; pace it with"
                " load.replay.speed or load.replay.rate_qps"
            )
    if replay.file is None:  # a run's id: where the run starts, its data directory says
        return
    load_replay(replay.at(scenario.base_dir))


def check_capture(capture: CaptureConfig, base_dir: Path) -> None:
    """`capture.source: pcap`: tcpdump must be installed. `capture.socket` given as a
    path: it must fit a unix socket and its directory exist. One with `{run_dir}` is
    checked when the run opens it (the run's directory is named then): a path too long
    ends the start with one line, before the target."""
    if capture.source == "pcap":
        if shutil.which("tcpdump") is None:
            raise InputError(
                "capture.source pcap: tcpdump is not installed (Debian: apt-get install tcpdump)"
            )
        return
    if capture.socket is None or "{run_dir}" in capture.socket:
        return
    path = Path(capture.socket)
    path = path if path.is_absolute() else base_dir / path
    size = len(os.fsencode(path))
    if size > SOCKET_PATH_MAX_BYTES:
        raise InputError(
            f"capture.socket: {path} is {size} bytes, more than the {SOCKET_PATH_MAX_BYTES}"
            " a unix socket path may hold"
        )
    if not path.parent.is_dir():
        raise InputError(f"capture.socket: {path.parent} is not a directory")


def check_load(load: LoadConfig, base_dir: Path, rates: Iterable[tuple[str, float]]) -> None:
    from soak.load.queries import build_classes

    build_classes(load.mix, base_dir, seed=0)  # every file read and every line parsed
    for where, rate_qps in rates:
        problem = rate_problem(rate_qps, load.workers, load.protocol)
        if problem is not None:
            raise InputError(f"{where}: {problem}")


def rate_problem(rate_qps: float, workers: int, protocol: str) -> str | None:
    """Why a rate cannot be sent by `workers` workers, or None (0 is flat out)."""
    ceiling_qps = workers * WORKER_MAX_QPS[protocol]
    if rate_qps <= ceiling_qps:
        return None
    return (
        f"{rate_qps:,.0f} q/s is more than {workers} load worker(s) can send over"
        f" {protocol.upper()} (at most {ceiling_qps:,.0f} q/s,"
        f" {WORKER_MAX_QPS[protocol]:,.0f} per worker); lower the rate or raise load.workers"
    )


def check_target_files(target: TargetConfig, base_dir: Path) -> None:
    from soak.targets.render import file_text

    for spec in target.files:
        file_text(spec, base_dir)  # InputError if unreadable or not text


def check_secrets(scenario: Scenario, reader: str | None = None) -> None:
    """Every secret reference (`{env.NAME}`, `{file:PATH}`) of the scenario can be read
    here: an unset variable or an unreadable file is one line and exit 2. The values are
    read and dropped; only the run's targets, probes and samplers use them."""
    from soak.targets.render import file_text

    for where, text in _strings(scenario.model_dump(mode="json"), ""):
        reveal(text, scenario.base_dir, where.lstrip(".") or "scenario", reader=reader)
    for target in [*scenario.services, scenario.target]:
        for spec in target.files:
            text = file_text(spec, scenario.base_dir)
            reveal(text, scenario.base_dir, f"{target.name}: file {spec.dest}", reader=reader)


def check_placeholder_syntax(scenario: Scenario) -> None:
    """A name in braces that is not a placeholder (`{env:TOKEN}`, `{rundir}`) would be sent
    as written: refused here, in any field and in any target's file, with what it meant."""
    from soak.targets.render import file_text

    for where, text in _strings(scenario.model_dump(mode="json"), ""):
        check_text(text, where.lstrip(".") or "scenario")
    for target in [*scenario.services, scenario.target]:
        for spec in target.files:
            check_text(file_text(spec, scenario.base_dir), f"{target.name}: file {spec.dest}")


def _strings(value: object, where: str) -> Iterator[tuple[str, str]]:
    """(field path, text) of every string in a dumped model."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}.{i}")


def check_binary(target: ProcessTarget, base_dir: Path) -> None:
    """argv[0] on PATH (the target's own PATH if it sets one) or at its path; a name
    with a placeholder is left to the start."""
    binary = target.argv[0]
    if "{" in binary:
        return
    if "/" in binary:
        path = Path(binary) if Path(binary).is_absolute() else base_dir / binary
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise InputError(f"{target.name}: binary not found or not executable: {path}")
        return
    search = target.env.get("PATH", os.environ.get("PATH", ""))
    if "{" in search:
        search = os.environ.get("PATH", "")
    if shutil.which(binary, path=search) is None:
        raise InputError(f"{target.name}: binary not found on PATH: {binary}")


def check_image(target: DockerTarget) -> None:
    """The image is in the local engine (soak does not pull)."""
    from soak.docker_client import engine
    from soak.targets.docker_engine import image_problem

    client = engine()  # TargetStartError (exit 2) without an engine
    try:
        problem = image_problem(client, target.name, target.image)
    finally:
        client.close()
    if problem is not None:
        raise InputError(problem)


def check_fixed_ports(target: TargetConfig) -> None:
    """A fixed host port (`ports.NAME.host`) that something else holds now."""
    from soak.targets.ports import port_free

    given: set[int] = set()
    for name, spec in target.ports.items():
        if spec.host is None:
            continue
        if spec.host in given:
            raise InputError(f"{target.name}: host port {spec.host} is given to two ports")
        given.add(spec.host)
        if not port_free(target.host, spec.host, spec.protocol):
            raise InputError(
                f"{target.name}: port {name} ({target.host}:{spec.host}/{spec.protocol})"
                " is already in use"
            )


# ---------------------------------------------------------------- placeholders and port names

# Stand-ins for what a start gives: only whether a placeholder can be filled is checked.
_ANY_DIR = "/run-dir"
_ANY_PORT = 1


@dataclass(frozen=True)
class _KnownService:
    """A helper as `fill_services` sees it before it has started: its named ports."""

    host: str
    ports: Mapping[str, int]


def check_placeholders(scenario: Scenario) -> None:
    """Every `{...}` in every target's fields and files filled as its start would fill it
    (an unknown port or service is the line a start would give), and every port a probe,
    a setup call or a sampler names is one of the target's."""
    helpers = {
        s.name: _KnownService(s.host, dict.fromkeys(s.ports, _ANY_PORT)) for s in scenario.services
    }
    for helper in scenario.services:
        _check_target_placeholders(helper, scenario.base_dir, services=None)
    _check_target_placeholders(scenario.target, scenario.base_dir, services=helpers)
    check_port_names(scenario)


def _check_target_placeholders(
    target: TargetConfig, base_dir: Path, services: Mapping[str, _KnownService] | None
) -> None:
    """`services` None: a helper, whose `{service.*}` placeholders nothing fills."""
    from soak.targets.render import file_text

    ports = dict.fromkeys(target.ports, _ANY_PORT)
    values = Placeholders(run_dir=_ANY_DIR, host=target.host, ports=ports, data_dir=_ANY_DIR)
    # A process target's own data_dir is where {data_dir} comes from: not known there.
    own_dir = Placeholders(run_dir=_ANY_DIR, host=target.host, ports=ports)
    fields = target.model_dump(exclude={"files"})  # a file's text: below, as its start says it
    texts = [(f"{target.name}{where}", text) for where, text in _strings(fields, "")]
    texts += [(f"file {spec.dest}", file_text(spec, base_dir)) for spec in target.files]
    for where, text in texts:
        if services is None and services_named(text):
            raise InputError(
                f"{where}: {{service.*}} placeholders are filled only in the target, "
                f"not in the helper service {target.name!r}"
            )
        filled = fill_services(text, services or {}, where)
        # Secrets left as written: check_secrets reads those (and only where they are read).
        own = own_dir if where == f"{target.name}.data_dir" else values
        render(filled, own, where, secrets=False)


def check_port_names(scenario: Scenario) -> None:
    """A readiness probe, a condition, a setup call or a sampler that names a port the
    target does not have would fail at every try; said here instead."""
    for helper in scenario.services:
        _check_named(_probe_ports(helper), helper)
    target, samplers = scenario.target, scenario.samplers
    named = _probe_ports(target) + [(f"setup.{i}", c.port) for i, c in enumerate(scenario.setup)]
    if samplers.agent is None:  # a target on another node: sampled there, by its own ports
        named += [(f"samplers.dig.{i}", d.port) for i, d in enumerate(samplers.dig)]
        named += [(f"samplers.http.{i}", h.port) for i, h in enumerate(samplers.http)]
        named += [("samplers.prom.port", samplers.prom.port)] if samplers.prom else []
        named += [("samplers.pprof.port", samplers.pprof.port)] if samplers.pprof else []
    _check_named(named, target)


def _probe_ports(target: TargetConfig) -> list[tuple[str, str]]:
    ready = target.ready
    named = [(f"{target.name}.ready.probes.{i}", p.port) for i, p in enumerate(ready.probes)]
    return named + [
        (f"{target.name}.ready.conditions.{k}", p.port) for k, p in ready.conditions.items()
    ]


def _check_named(named: Iterable[tuple[str, str]], target: TargetConfig) -> None:
    for where, port in named:
        if port not in target.ports:
            known = ", ".join(sorted(target.ports)) or "none"
            raise InputError(f"{where}: {target.name} has no port {port!r} (named ports: {known})")
