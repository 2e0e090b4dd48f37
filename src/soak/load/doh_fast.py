"""The DoH loop of a worker on the compiled fast path (soak.load._fastdoh).

The C Engine opens the connections (OpenSSL, ALPN h2), carries each query as
an HTTP/2 request through nghttp2 (POST or GET, doh.py's path and headers),
and counts into the UDP engine's windows and buckets; this module keeps the
pacing, the control pipe and the per-second Interval through udp_fast.drive,
as the compiled UDP loop does. It serves connections that last (reopened when
the server closes them or says GOAWAY) and every connection policy, with the
slots and policies stream_fast.churn_args gives (_fastchurn.h): churn (a quota
of queries, an age, an idle time before the close) and hang-ups (the
connections tcp.hangs_up picks reset with answers due, their requests in flight
abandoned). A server given by name is resolved here (target.Target, as
stream_fast.py does). What it does not serve (unfit: a long doh.path) runs on
the Python stream loop (tcp.py with doh.py), which is also the fallback when the
extension is not built (or SOAK_LOAD_PURE=1).
"""

from __future__ import annotations

from multiprocessing.connection import Connection
from typing import Any

from soak.load import stream_fast, udp_fast
from soak.load.conn import TlsSpec, alpn_wire
from soak.load.worker import Control, WorkerSpec

_fast: Any
try:
    from soak.load import _fastdoh as _fast
except ImportError:  # not built: the caller falls back to tcp.run_tcp
    _fast = None

# What the build needs (pyproject.toml), said when the Python loop stands in.
BUILD_NEEDS = "libssl-dev and libnghttp2-dev, then pip install -e ."
MAX_PATH_BYTES = 512  # _fastdoh_face.h: a request's :path is built in a fixed buffer


def available() -> bool:
    return _fast is not None  # it carries the UDP engine's C parts in its own build


def unfit(spec: WorkerSpec) -> str | None:
    """Why the compiled loop cannot run this spec (None: it can). It serves every
    connection policy, to an address or a name (target.py), at a path of at most
    MAX_PATH_BYTES."""
    if len(spec.doh_path.encode()) > MAX_PATH_BYTES:
        return f"doh.path is longer than {MAX_PATH_BYTES} bytes"
    return None


def make_engine(spec: WorkerSpec, origin_ns: int, address: str | None) -> Any:
    """The Engine, connecting to `address` (Target.address: None while the name does not
    resolve); :authority and the TLS server name stay the spec's."""
    tls = spec.tls if spec.tls is not None else TlsSpec(alpn=("h2",))
    host = tls.server_name or spec.host
    return _fast.Engine(
        udp_fast.engine_args(spec, [], origin_ns),
        address,
        spec.port,
        spec.flows,
        spec.doh_method == "GET",
        spec.doh_path,
        f"{host}:{spec.port}",  # doh.DohFlow's :authority
        tls.server_name,
        tls.ca_file,
        tls.resumption,
        alpn_wire(tls.alpn or ("h2",)),
        stream_fast.churn_args(spec),  # the slots and policies the TCP/DoT loop is given
    )


def run_doh_fast(spec: WorkerSpec, control: Control, conn: Connection) -> None:
    udp_fast.drive_connecting(spec, control, conn, make_engine)
