"""DNS over HTTPS (RFC 8484) connections for the stream loop: HTTP/2 through h2.

Each query is one HTTP/2 stream (POST with an application/dns-message body,
or GET with ?dns=base64url), many in flight per connection. The DNS id on the
wire is 0, as RFC 8484 recommends for caches; the stream id maps back to the
ring slot, and the answer gets the slot as its id before the usual matching.
The load's pool takes another connection where one is at the server's streams
in flight (accepting); the replay's client stays on its own and its requests
wait there (held, sent as answers free streams).
A response that is not 200, a reset stream and a GOAWAY with an error code
count as connection errors; such queries end as lost. What the server's HTTP/2
layer said is counted as the compiled loop counts it (_fastdoh_h2.h), into the
book's streams_reset, streams_refused and goaways: a stream ended with an error
code (RST_STREAM, or above a GOAWAY's last stream id: refused, not processed),
of them REFUSED_STREAM, and GOAWAY frames. A request refused by RST_STREAM is
not sent again here: its query is lost; the replay's flows move the requests a
GOAWAY left unprocessed to the client's next connection (went_away; they count as
refused, and in streams_retried where moved). h2 is pure Python:
measured per-query costs are in docs/benchmarks.md. This is the fallback of
the compiled DoH loop (doh_fast.py, _fastdoh.c), and the loop of what that one
does not serve: a long path (child.loop_for).
"""

from __future__ import annotations

import base64
import ssl
import time
from collections import deque
from collections.abc import Callable

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from h2.errors import ErrorCodes

from soak.load import wire
from soak.load.conn import Policy, StreamFlow
from soak.load.worker import Book


class DohFlow(StreamFlow):
    doh_get = False
    doh_path = "/dns-query"

    def __init__(
        self,
        host: str,
        port: int,
        policy: Policy,
        book: Book,
        tls: ssl.SSLContext | None = None,
        hangup: bool = False,
    ) -> None:
        super().__init__(host, port, policy, book, tls, hangup)
        # Requests handed over while the server's streams were all in flight (the
        # replay's clients stay on a full connection): they leave in order as answers
        # free streams (send_held), as nghttp2 holds them in the compiled loops; h2 would
        # refuse them (TooManyStreamsError).
        self.held: deque[tuple[int, bytes, bool, int]] = deque()  # slot, question, counted,
        # and the time its query times out (monotonic ns): a held request still there then
        # is dropped unsent (send_held), as a client gives up on it. 0: held as long as it
        # takes (the load's flows, which do not hold). The replay sets the timeout and asks
        # the ring whether the query still waits (a lost one is never sent).
        self.held_timeout_ns = 0
        self.waiting: Callable[[int], bool] | None = None
        # The replay's: requests the server will not process after its GOAWAY (above its
        # last stream id, or held) come off into `unprocessed` (slot, counted at the
        # socket already), for the client's next connection; `moved_in`: the slots this
        # connection took so (moved once: here they are lost as before). The load's stay.
        self.moves_unprocessed = False
        self.unprocessed: list[tuple[int, bool]] = []
        self.moved_in: set[int] = set()

    def handshake_ok(self, s: ssl.SSLSocket) -> bool:
        return s.selected_alpn_protocol() == "h2"

    def started(self) -> None:
        # Header validation and normalisation cost more than the rest of h2's work per
        # request (measured, docs/benchmarks.md); our headers are fixed and well formed.
        config = h2.config.H2Configuration(
            client_side=True,
            header_encoding=None,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            validate_inbound_headers=False,
        )
        self.h2 = h2.connection.H2Connection(config=config)
        self.h2.initiate_connection()
        self.streams: dict[int, tuple[int, bytearray, bool]] = {}  # id -> slot, body, status ok
        host = self.server_name or self.addr[0]
        self.authority = f"{host}:{self.addr[1]}".encode()
        self.wbuf += self.h2.data_to_send()

    def accepting(self, now: int) -> bool:
        # The server's SETTINGS bound the streams in flight; beyond them, the load's pool
        # picks another connection.
        return super().accepting(now) and not self.full()

    def full(self) -> bool:
        """As many streams in flight as the server's SETTINGS_MAX_CONCURRENT_STREAMS."""
        return len(self.streams) >= self.h2.remote_settings.max_concurrent_streams

    def queue(self, slot: int, question: bytes, now: int) -> None:
        self.carried += 1
        self.last_send_ns = now
        self.hold_or_send(slot, question, False)

    def move_in(self, slot: int, question: bytes, counted: bool, now: int) -> None:
        """A request another connection's GOAWAY left unprocessed, sent here once."""
        self.moved_in.add(slot)
        self.carried += 1
        self.last_send_ns = now
        self.hold_or_send(slot, question, counted)

    def hold_or_send(self, slot: int, question: bytes, counted: bool) -> None:
        if self.held or self.full():  # its turn comes when an answer frees a stream
            until = time.monotonic_ns() + self.held_timeout_ns if self.held_timeout_ns else 0
            self.held.append((slot, question, counted, until))
            return
        self.send(slot, question, counted)

    def send_held(self) -> None:
        """The held requests the server's streams have room for, in order (none once the
        connection is going away: they are counted failed when it closes). One whose query
        has timed out meanwhile is dropped unsent: it failed at the socket, and its query
        is lost at its timeout (an overloaded server is not sent work nobody waits for)."""
        now = time.monotonic_ns()
        while self.held and not self.goaway and not self.full():
            slot, question, counted, until = self.held.popleft()
            if (until and now > until) or (self.waiting is not None and not self.waiting(slot)):
                self.answered += 1  # nothing more of it here
                self.book.send_failed += 1
                continue
            self.send(slot, question, counted)

    def went_away(self, last_stream_id: int | None) -> None:
        """GOAWAY (RFC 9113 6.8): the requests above its last stream id and the held ones
        were not processed; with moves_unprocessed those not moved in already go to
        `unprocessed` (nothing more of them here)."""
        if not self.moves_unprocessed:
            return
        last = (1 << 31) if last_stream_id is None else last_stream_id
        for sid in [sid for sid in self.streams if sid > last]:
            slot = self.streams[sid][0]
            if slot not in self.moved_in:
                del self.streams[sid]
                self.answered += 1
                self.unprocessed.append((slot, True))
                self.refused_moving()
        stay: deque[tuple[int, bytes, bool, int]] = deque()
        for slot, question, counted, until in self.held:
            if slot in self.moved_in:
                stay.append((slot, question, counted, until))
            else:
                self.unprocessed.append((slot, counted))
                self.answered += 1
                self.refused_moving()
        self.held = stay

    def refused_moving(self) -> None:
        """A request moved off as unprocessed counts as reset and refused (nghttp2 closes
        it with REFUSED_STREAM in the compiled loop), not as a connection error."""
        self.book.streams_reset += 1
        self.book.streams_refused += 1

    def unwritten(self) -> None:
        super().unwritten()
        self.book.send_failed += len(self.held)  # never sent: each fails at the socket
        self.held.clear()

    def send(self, slot: int, question: bytes, counted: bool = False) -> None:
        """One request into h2 and its frames into the write buffer (counted at the
        socket once taken, unless it was already on another connection)."""
        try:
            self._request(slot, question)
        except h2.exceptions.ProtocolError:
            # Refused by the connection's own state (closed, out of streams or of flow-
            # control window): the query is sent and will be lost; a new one replaces it.
            self.book.conn_errors += 1
            self.book.send_failed += 1  # none of its bytes will reach the socket
            self.answered += 1
            self.goaway = True
            self.wbuf += self.h2.data_to_send()
            return
        self.wbuf += self.h2.data_to_send()
        if not counted:  # its HEADERS (and DATA) frames end here: sent once taken this far
            self.query_ends.append(self.written_bytes + len(self.wbuf))

    def _request(self, slot: int, question: bytes) -> None:
        conn = self.h2
        sid = conn.get_next_available_stream_id()
        msg = wire.query(question)  # id 0
        path = self.doh_path.encode()
        if self.doh_get:
            dns = base64.urlsafe_b64encode(msg).rstrip(b"=")
            headers = self._headers(b"GET", path + b"?dns=" + dns)
            conn.send_headers(sid, headers, end_stream=True)
        else:
            headers = self._headers(b"POST", path)
            headers += [
                (b"content-type", b"application/dns-message"),
                (b"content-length", str(len(msg)).encode()),
            ]
            conn.send_headers(sid, headers)
            conn.send_data(sid, msg, end_stream=True)
        self.streams[sid] = (slot, bytearray(), True)

    def _headers(self, method: bytes, path: bytes) -> list[tuple[bytes, bytes]]:
        return [
            (b":method", method),
            (b":scheme", b"https"),
            (b":authority", self.authority),
            (b":path", path),
            (b"accept", b"application/dns-message"),
        ]

    def messages(self, data: bytes) -> list[bytes]:
        conn = self.h2
        out = []
        try:
            events = conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            # The connection is unusable: its queries end as lost, a new one replaces it.
            self.book.conn_errors += 1
            self.answered += len(self.streams)
            self.streams.clear()
            self.goaway = True
            return []
        for ev in events:
            if isinstance(ev, h2.events.ResponseReceived):
                entry = self.streams.get(ev.stream_id)
                if entry is not None:
                    status = dict(ev.headers).get(b":status")
                    self.streams[ev.stream_id] = (entry[0], entry[1], status == b"200")
            elif isinstance(ev, h2.events.DataReceived):
                entry = self.streams.get(ev.stream_id)
                if entry is not None:
                    entry[1].extend(ev.data)
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                done = self.streams.pop(ev.stream_id, None)
                if done is None:
                    continue
                slot, body, ok = done
                self.answered += 1
                self.book.socket_received += 1  # an answer read whole, good or not
                if ok and len(body) >= wire.HEADER_LEN:
                    wire.set_id(body, slot)
                    out.append(bytes(body))
                else:
                    self.book.conn_errors += 1
            elif isinstance(ev, h2.events.StreamReset):
                self.reset(ev.stream_id, ev.error_code or 0)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.goaway = True  # take no more queries; retired and replaced
                self.book.goaways += 1
                if ev.error_code:  # not a graceful NO_ERROR shutdown
                    self.book.conn_errors += 1
                # First what the replay moves to the next connection, then the rest above
                # the last stream id refused (reset() would take the streams away).
                self.went_away(ev.last_stream_id)
                self.refused_by_goaway(ev.last_stream_id)
        self.send_held()
        self.wbuf += conn.data_to_send()
        return out

    def reset(self, stream_id: int, error_code: int) -> None:
        """A stream of ours the server ended without its answer: nothing more will come
        on it, its query is lost at the timeout (a connection error). One ended with an
        error code is counted apart (streams_reset; REFUSED_STREAM: streams_refused)."""
        if self.streams.pop(stream_id, None) is None:
            return
        self.answered += 1
        book = self.book
        book.conn_errors += 1
        if error_code != ErrorCodes.NO_ERROR:
            book.streams_reset += 1
            if error_code == ErrorCodes.REFUSED_STREAM:
                book.streams_refused += 1

    def refused_by_goaway(self, last_stream_id: int | None) -> None:
        """The streams above a GOAWAY's last stream id were not processed (RFC 9113 6.8):
        refused, as nghttp2 closes them in the compiled loop (h2 leaves them open)."""
        above = [sid for sid in self.streams if sid > (last_stream_id or 0)]
        for sid in above:
            self.reset(sid, ErrorCodes.REFUSED_STREAM)
