"""The TCP and DoT loop of a worker on the compiled path (soak.load._faststream).

The C Engine opens the `flows` connections (TLS through OpenSSL for DoT), queues
pipelined queries on them, reads and matches the replies, reconnects what the
server closes and counts, in the same windows and buckets as _fastudp; udp_fast.drive
keeps the pacing, the control pipe and the per-second Interval through cadence.py,
as for the UDP engine. Connections last here: a spec whose connection policy churns
them (a quota, an age, hang-ups) runs tcp.run_tcp, which stays the fallback when the
extension is not built (or SOAK_LOAD_PURE=1). DoH is not this loop's.
"""

from __future__ import annotations

import ipaddress
from multiprocessing.connection import Connection
from typing import Any

from soak.load import udp_fast
from soak.load.conn import alpn_wire
from soak.load.worker import Control, WorkerSpec

_fast: Any
try:
    from soak.load import _faststream as _fast
except ImportError:  # not built: the caller falls back to tcp.run_tcp
    _fast = None

PROTOCOLS = ("tcp", "dot")


def available() -> bool:
    return _fast is not None


def supports(spec: WorkerSpec) -> bool:
    """TCP or DoT to an address literal (the Engine does not resolve names) whose
    connections last (no class churns them or hangs up)."""
    if spec.protocol not in PROTOCOLS:
        return False
    try:
        ipaddress.ip_address(spec.host)
    except ValueError:
        return False
    policies = [p for p in spec.policies or () if p is not None]
    return not any(p.churns or p.hangup_fraction > 0 for p in policies)


def make_engine(spec: WorkerSpec, origin_ns: int) -> Any:
    tls = spec.tls if spec.protocol == "dot" else None
    tls_args = None
    if tls is not None:
        tls_args = (tls.server_name, tls.ca_file, tls.resumption, alpn_wire(tls.alpn))
    args = udp_fast.engine_args(spec, [], origin_ns)  # no sockets: the Engine connects
    return _fast.Engine(spec.host, spec.port, spec.flows, tls_args, args)


def run_stream_fast(spec: WorkerSpec, control: Control, conn: Connection) -> None:
    udp_fast.drive(spec, control, conn, lambda origin_ns: make_engine(spec, origin_ns))
