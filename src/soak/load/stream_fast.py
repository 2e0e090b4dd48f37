"""The TCP and DoT loop of a worker on the compiled path (soak.load._faststream).

The C Engine opens the connections (TLS through OpenSSL for DoT), queues pipelined
queries on them, reads and matches the replies, reconnects what the server closes
and counts, in the same windows and buckets as _fastudp; udp_fast.drive keeps the
pacing, the control pipe and the per-second Interval through cadence.py, as for the
UDP engine. A class's connection policy runs here too, with the slots tcp.Flows would
give it (conn.slot_plan): churn (a quota of queries per connection, an age, an idle
time before the close) and hang-ups (the same connections as tcp.hangs_up picks reset
with answers due, their queries in flight abandoned). A server given by name is
resolved here (target.Target: again at most once a second, later connects going to a
new address, as tcp.run_tcp's connects follow the name): it serves every TCP and DoT
spec. tcp.run_tcp is the fallback when the extension is not built (said on stderr) or
SOAK_LOAD_PURE=1. DoH is not this loop's.
"""

from __future__ import annotations

from multiprocessing.connection import Connection
from typing import Any

from soak.load import udp_fast
from soak.load.conn import Policy, alpn_wire, slot_plan
from soak.load.worker import Control, WorkerSpec

_fast: Any
try:
    from soak.load import _faststream as _fast
except ImportError:  # not built: the caller falls back to tcp.run_tcp
    _fast = None


def available() -> bool:
    return _fast is not None


def churn_args(
    spec: WorkerSpec,
) -> tuple[list[list[int]], list[tuple[int, int, int, float, int]]] | None:
    """The Engine's `churn`: per class its slots, per slot (quota, idle_ns, age_ns,
    hangup_fraction, the class whose policy it follows), -1 for none; None when no
    class's connections churn (a policy that hangs up churns: load_config says so)."""
    policies = [p or Policy() for p in spec.policies or [None] * len(spec.classes)]
    if not any(p.churns for p in policies):
        return None
    pools, owner = slot_plan(spec.flows, [c.weight for c in spec.classes], policies)
    per_slot = []
    for c in owner:
        p = policies[c]
        quota = p.queries_per_connection if p.queries_per_connection is not None else -1
        age_ns = p.reconnect_every_ns if p.reconnect_every_ns is not None else -1
        per_slot.append((quota, p.idle_ns, age_ns, p.hangup_fraction, c))
    return pools, per_slot


def make_engine(spec: WorkerSpec, origin_ns: int, address: str | None) -> Any:
    """The Engine, connecting to `address` (Target.address: None while the name does not
    resolve); the TLS server name stays tls.server_name's."""
    tls = spec.tls if spec.protocol == "dot" else None
    tls_args = None
    if tls is not None:
        tls_args = (tls.server_name, tls.ca_file, tls.resumption, alpn_wire(tls.alpn))
    args = udp_fast.engine_args(spec, [], origin_ns)  # no sockets: the Engine connects
    return _fast.Engine(address, spec.port, spec.flows, tls_args, args, churn_args(spec))


def run_stream_fast(spec: WorkerSpec, control: Control, conn: Connection) -> None:
    udp_fast.drive_connecting(spec, control, conn, make_engine)
