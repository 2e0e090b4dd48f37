"""The docker runtime's container spec: the engine's create() arguments from a target's config.

Pure: no engine is asked, so the spec is tested without one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docker.types import Mount, Ulimit

from soak.errors import InputError
from soak.placeholders import Placeholders, render, render_all, render_map
from soak.targets.common import safe_name
from soak.targets.docker_engine import run_labels
from soak.targets.render import resolve
from soak.targets.specs import DockerTarget, PortSpec


def resource_name(run_id: str, target: str) -> str:
    """The name of a run's container (and of the fresh volume made for it)."""
    return f"soak-{safe_name(run_id)}-{safe_name(target)}"


@dataclass(frozen=True)
class ContainerSpec:
    """One target's container, as the engine is asked to create it."""

    cfg: DockerTarget
    run_id: str
    base_dir: Path  # the scenario's directory: relative mount sources start there
    extra_labels: dict[str, str] = field(default_factory=dict)  # the caller's, beside the run's

    def host_port_specs(self, host_net: bool) -> dict[str, PortSpec]:
        """With host networking the port inside is the host port, unless one is given."""
        if not host_net:
            return self.cfg.ports
        return {
            name: spec.model_copy(update={"host": spec.host or spec.container})
            for name, spec in self.cfg.ports.items()
        }

    def create_kwargs(
        self, values: Placeholders, ports: dict[str, int], volume: str | None, host_net: bool
    ) -> dict[str, Any]:
        cfg = self.cfg
        mounts = [
            Mount(
                target=m.target,
                source=str(resolve(render(m.source, values, "mounts"), self.base_dir)),
                type="bind",
                read_only=m.read_only,
            )
            for m in cfg.mounts
        ]
        if volume is not None and cfg.volume is not None:
            mounts.append(Mount(target=cfg.volume.mount, source=volume, type="volume"))
        kwargs: dict[str, Any] = {
            "name": resource_name(self.run_id, cfg.name),
            "command": render_all(cfg.command, values, "command") if cfg.command else None,
            "environment": render_map(cfg.environment, values, f"{cfg.name}.environment"),
            "labels": {**self.extra_labels, **run_labels(self.run_id, cfg.name)},
            "mounts": mounts,
            "read_only": cfg.read_only,
            "tmpfs": {path: "" for path in cfg.tmpfs},
            "cap_drop": cfg.cap_drop or None,
            "cap_add": cfg.cap_add or None,
            "security_opt": ["no-new-privileges"] if cfg.no_new_privileges else None,
            "user": cfg.user,
            "init": cfg.init,
            "cpuset_cpus": cfg.cpuset,
            "detach": True,
        }
        if cfg.cpus is not None:
            kwargs["nano_cpus"] = int(cfg.cpus * 1e9)  # billionths of a CPU, not a time
        if cfg.mem_limit is not None:
            # Swap equal to the limit: the container is OOM-killed rather than swapping.
            kwargs["mem_limit"] = cfg.mem_limit
            kwargs["memswap_limit"] = cfg.mem_limit
        if cfg.nofile is not None:
            kwargs["ulimits"] = [Ulimit(name="nofile", soft=cfg.nofile, hard=cfg.nofile)]
        if host_net:
            kwargs["network_mode"] = "host"  # the command must use {port.<name>}
        else:
            kwargs["ports"] = self.port_bindings(ports)
        return kwargs

    def port_bindings(self, ports: dict[str, int]) -> dict[str, tuple[str, int]]:
        bindings: dict[str, tuple[str, int]] = {}
        for name, spec in self.cfg.ports.items():
            if spec.container is None:
                raise InputError(
                    f"{self.cfg.name}: port {name} needs `container` (the port inside)"
                )
            protocols = ["tcp", "udp"] if spec.protocol == "both" else [spec.protocol]
            for proto in protocols:
                bindings[f"{spec.container}/{proto}"] = (self.cfg.host, ports[name])
        return bindings
