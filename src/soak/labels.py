"""The labels soak puts on what it creates on an engine (containers, volumes, swarm
services, a Kubernetes Job): the run, the target or role, and the owner, so that a
sweep finds what an interrupted run left and leaves a live one's alone."""

from __future__ import annotations

import os
import socket

LABEL_RUN = "soak.run"  # the run id
LABEL_TARGET = "soak.target"  # a target's name (containers, volumes)
LABEL_ROLE = "soak.role"  # an agent's role (load-agent, sampler)
LABEL_OWNER = "soak.owner"  # host:pid of the soak process that made it


def owner_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"
