"""Worker interpreters spawned for a LoadRunner, and what their WorkerSpec is built
from: a class's connection policy and the TLS settings."""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path

import soak
from soak.clock import s_to_ns
from soak.errors import InputError
from soak.load.conn import Policy, TlsSpec
from soak.load.load_config import ConnectionPolicy, LoadConfig


def spawn_worker(
    module: str = "soak.load.child",
) -> tuple[subprocess.Popen[bytes], Connection, Connection]:
    """A worker interpreter (`python -m module CTRL_FD STATS_FD`) with a control pipe
    (to it) and a stats pipe (from it).

    A load worker's first message must be its WorkerSpec; a replay's, its ChildSpec.
    """
    ctrl_r, ctrl_w = os.pipe()
    stats_r, stats_w = os.pipe()
    env = dict(os.environ)
    package_root = str(Path(soak.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    argv = [sys.executable, "-m", module, str(ctrl_r), str(stats_w)]
    try:
        proc = subprocess.Popen(argv, pass_fds=(ctrl_r, stats_w), stdin=subprocess.DEVNULL, env=env)
    finally:
        os.close(ctrl_r)
        os.close(stats_w)
    ctrl = Connection(ctrl_w, readable=False)
    stats = Connection(stats_r, writable=False)
    return proc, ctrl, stats


def policy_of(cp: ConnectionPolicy | None) -> Policy:
    if cp is None:
        return Policy()
    every = cp.reconnect_every_s
    return Policy(
        cp.queries_per_connection,
        s_to_ns(cp.idle_s),
        s_to_ns(every) if every else None,
        cp.hangup_fraction,
    )


def tls_spec(cfg: LoadConfig, base_dir: Path) -> TlsSpec | None:
    if cfg.protocol not in ("dot", "doh"):
        return None
    ca = cfg.tls.ca_file
    if ca is not None:
        ca = ca if ca.is_absolute() else base_dir / ca
        if not ca.is_file():
            raise InputError(f"tls.ca_file: no such file: {ca}")
    alpn = ("h2",) if cfg.protocol == "doh" else ("dot",)
    return TlsSpec(cfg.tls.resumption, cfg.tls.server_name, str(ca) if ca else None, alpn)
