"""The report's setup table: the target and how it ran, the machine, soak's own version."""

from __future__ import annotations

import os
import platform
from importlib import metadata

from soak import hostproc
from soak.report.model import ReportInput


def setup_table(inp: ReportInput) -> dict[str, str]:
    setup = {
        "Target": f"{inp.target_name} {inp.version}".strip()
        + (" (as the scenario names it)" if inp.version else ""),
        "Version reported": inp.detected_version or "not asked (see target.version_command)",
        "Runs as": inp.target_desc,
        "soak": soak_version(),
        "Host": _host_line(inp.host if inp.host is not None else host_info()),
    }
    setup.update({str(k): str(v) for k, v in inp.extra.items()})
    return setup


def host_info() -> dict[str, str]:
    """This machine, as the setup table shows it."""
    info = {
        "name": platform.node(),
        "cpus": str(os.cpu_count() or "?"),
        "kernel": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
    }
    try:
        total_bytes = hostproc.read_meminfo().get("MemTotal")
    except OSError as exc:
        info["memory"] = f"unknown ({exc.strerror})"
    else:
        if total_bytes is not None:
            info["memory"] = f"{total_bytes / 1024**3:.1f} GiB"
    return info


def _host_line(host: dict[str, str]) -> str:
    order = ("name", "cpus", "memory", "kernel", "machine")
    parts = [f"{k} {host[k]}" for k in order if k in host]
    parts += [f"{k} {v}" for k, v in host.items() if k not in order]
    return ", ".join(parts)


def soak_version() -> str:
    """The installed soak's version (the package metadata), "unknown" outside a package."""
    try:
        return metadata.version("soak")
    except metadata.PackageNotFoundError:
        return "unknown"
