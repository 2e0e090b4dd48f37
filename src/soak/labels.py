"""The labels soak puts on what it creates on an engine (containers, volumes, swarm
services, a Kubernetes Job): the run, the target or role, and the owner, so that a
sweep finds what an interrupted run left and leaves a live one's alone."""

from __future__ import annotations

import os
import socket

from soak.procfs import start_ticks

LABEL_RUN = "soak.run"  # the run id
LABEL_TARGET = "soak.target"  # a target's name (containers, volumes)
LABEL_ROLE = "soak.role"  # an agent's role (load-agent, sampler)
# host:pid:start of the soak process that made it; the start (its /proc/PID/stat start
# time, in clock ticks) tells the owner from a later process given the same pid.
LABEL_OWNER = "soak.owner"


def owner_label() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{start_ticks(pid)}"


def parse_owner(owner: str | None) -> tuple[str, int, int | None] | None:
    """(host, pid, start ticks) of an owner label, None when there is none or it cannot be
    read. `host:pid` (an older soak's) gives no start: the pid alone is its identity."""
    host, _, rest = (owner or "").partition(":")
    pid_text, _, start_text = rest.partition(":")
    if not host or not pid_text.isdigit() or not (start_text.isdigit() or start_text == ""):
        return None
    return host, int(pid_text), int(start_text) if start_text else None
