"""The replay's compiled TCP and DoT loop (soak.load.replay._fastreplay_stream) and its
DoH loop (soak.load.replay._fastreplay_doh: the same face over HTTP/2) behind the
compiled UDP loop's face, so that _engine.run_compiled drives any of them.

Each client's captured connection is a stream here, numbered once (streams()): the C
loop keeps a connection per stream, as _conns.ClientConns keeps a StreamFlow per
client and connection number. Its windows come back as the load engine's
(_fastudp_loop.h's window_of: sent, completed, lost, late, wrong, skipped, abandoned
per class; a replay never hangs up); take() turns them into the UDP loop's (due, sent,
skipped, completed, lost), and take() and shut() write the connections' figures
(opened, errors, reused, idled out, open now, handshake times) into the replay's
ClientConns, where a soak run's windows and the result read them.
"""

from __future__ import annotations

import array
from types import ModuleType
from typing import Any, Protocol

from soak.load.replay._conns import Client, ClientConns
from soak.load.replay._plan import Plan
from soak.traffic.capture_file import Capture
from soak.traffic.replay_config import ReplayConfig

PROTOCOLS = ("tcp", "dot", "doh")
WINDOW_SLOTS = 64  # open windows at once (a power of two, as _fastreplay.c's NW)


def compiled_stream(transport: str = "tcp") -> ModuleType | None:
    """The compiled loop of a stream transport (DoH's, or TCP's and DoT's), None: not built."""
    try:
        if transport == "doh":
            from soak.load.replay import _fastreplay_doh

            return _fastreplay_doh
        from soak.load.replay import _fastreplay_stream
    except ImportError:
        return None
    return _fastreplay_stream


def streams(capture: Capture) -> tuple[bytes, bytes]:
    """Each captured query's stream, and each stream's client (int32s): a stream is one
    (client, connection number) of the capture, numbered in order of first use."""
    ids: dict[tuple[int, int], int] = {}
    per_query, client_of = array.array("i"), array.array("i")
    for q in capture.queries:
        key = (q.client, q.conn)
        s = ids.get(key)
        if s is None:
            s = ids[key] = len(ids)
            client_of.append(q.client)
        per_query.append(s)
    return per_query.tobytes(), client_of.tobytes()


class Replay(Protocol):
    """What of the Replay (_loop.Replay, _engine.Replay) the stream loop reads."""

    cfg: ReplayConfig
    plan: Plan
    conns: ClientConns
    clients: list[Client]
    nc: int
    timeout_ns: int


Counts = tuple[int, int, int, int, int, dict[int, int], dict[int, int]]


def doh_request(conns: ClientConns) -> tuple[bool, str, str]:
    """A DoH query's request as the Python replay's (doh.DohFlow's defaults): GET or not,
    the path, and the :authority (the TLS server name, else the address, and the port)."""
    from soak.load.doh import DohFlow

    host = conns.tls.server_name if conns.tls is not None else None
    return DohFlow.doh_get, DohFlow.doh_path, f"{host or conns.host}:{conns.port}"


class StreamEngine:
    """_fastreplay's Engine (play, drain, take, stats, shut) over TCP, DoT or DoH."""

    def __init__(self, replay: Replay, address: bytes) -> None:
        transport = replay.cfg.transport
        module = compiled_stream(transport)
        assert module is not None
        conns = replay.conns
        tls = None
        if transport in ("dot", "doh"):
            spec = conns.tls
            tls = (spec.server_name, spec.ca_file) if spec is not None else (None, None)
        per_query, client_of = streams(replay.plan.capture)
        nc = replay.nc
        # No mix: the plan gives each query's class and question (engine_setup's
        # questions, random sources and checks are the open-loop load's).
        mix = ([[b"\0"]] * nc, [None] * nc, [None] * nc, [0], 0, [0] * nc, 0, WINDOW_SLOTS, 0)
        rest = (
            len(replay.clients), nc, replay.timeout_ns, conns.idle_ns, replay.cfg.rename_clients,
            per_query, client_of, mix,
        )  # fmt: skip
        self.conns: ClientConns = conns
        if transport == "doh":
            self.engine: Any = module.Engine(address, tls, *doh_request(conns), *rest)
        else:
            self.engine = module.Engine(address, tls, *rest)
        self.play = self.engine.play
        self.drain = self.engine.drain
        self.stats = self.engine.stats

    def take(self, below: int, force: bool) -> list[tuple[int, list[Counts], dict[int, int]]]:
        """_fastreplay's take: (second, [(due, sent, skipped, completed, lost, rcodes,
        lat_us)] per class, {send offset µs: n}), from the load engine's windows (late:
        stats() counts it). The connections' figures are brought up to date first: a
        soak run's windows carry their growth (_child reads ClientConns.counts as each
        closes)."""
        self.tell_conns()
        out = []
        for (second, _refused, classes), offsets in self.engine.take(below, force):
            counts = [
                (s + skip, s, skip, ok, lost, rc, lat)
                for s, ok, lost, _, _, skip, _, rc, lat in classes
            ]
            out.append((second, counts, offsets))
        return out

    def shut(self) -> None:
        """Every connection closed; their figures into the replay's ClientConns."""
        self.engine.shut()
        self.tell_conns()

    def tell_conns(self) -> None:
        """The connections' figures so far into the replay's ClientConns (its counts(),
        open_sockets, and the handshake times folded into its histogram)."""
        conns, book = self.conns, self.conns.book
        opened, errors, resumed, reused, idled_out, open_now, handshake_us = self.engine.conns()
        book.conn_opened, book.conn_errors, book.conn_resumed = opened, errors, resumed
        conns.reused, conns.idled_out, conns.open_sockets = reused, idled_out, open_now
        if hasattr(self.engine, "h2"):  # DoH: what the server's HTTP/2 layer said
            h2 = self.engine.h2()
            book.streams_reset, book.streams_refused, book.streams_retried, book.goaways = h2
        for us, n in handshake_us.items():
            book.handshake_us[us] = book.handshake_us.get(us, 0) + n
        conns.fold_handshakes()
