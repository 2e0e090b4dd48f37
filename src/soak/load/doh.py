"""DNS over HTTPS (RFC 8484) connections for the stream loop: HTTP/2 through h2.

Each query is one HTTP/2 stream (POST with an application/dns-message body,
or GET with ?dns=base64url), many in flight per connection. The DNS id on the
wire is 0, as RFC 8484 recommends for caches; the stream id maps back to the
ring slot, and the answer gets the slot as its id before the usual matching.
A response that is not 200, a reset stream and a GOAWAY with an error code
count as connection errors; such queries end as lost. What the server's HTTP/2
layer said is counted as the compiled loop counts it (_fastdoh_h2.h), into the
book's streams_reset, streams_refused and goaways: a stream ended with an error
code (RST_STREAM, or above a GOAWAY's last stream id: refused, not processed),
of them REFUSED_STREAM, and GOAWAY frames. A refused request is not sent again
here (streams_retried stays 0): its query is lost. h2 is pure Python:
measured per-query costs are in docs/benchmarks.md. This is the fallback of
the compiled DoH loop (doh_fast.py, _fastdoh.c), and the loop of what that one
does not serve: a long path (child.loop_for).
"""

from __future__ import annotations

import base64
import ssl

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from h2.errors import ErrorCodes

from soak.load import wire
from soak.load.conn import StreamFlow


class DohFlow(StreamFlow):
    doh_get = False
    doh_path = "/dns-query"

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
        if not super().accepting(now):
            return False
        # The server's SETTINGS bound the streams in flight; beyond them, another connection.
        return len(self.streams) < self.h2.remote_settings.max_concurrent_streams

    def queue(self, slot: int, question: bytes, now: int) -> None:
        self.carried += 1
        self.last_send_ns = now
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
        # Its HEADERS (and DATA) frames end here: sent once the socket has taken this far.
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
                self.refused_by_goaway(ev.last_stream_id)
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
