"""dnstap: Frame Streams (fstrm) framing and the dnstap protobuf, the few fields a
replay needs, read by a small decoder of our own.

Why not `fstrm` and `dnstap-pb` from PyPI: dnstap-pb pulls in the protobuf runtime
and generated classes for a message of which we read six fields, and neither
package listens on the bidirectional socket a server writes to (READY, ACCEPT,
START ... STOP, FINISH), which is what `soak capture` needs. The wire formats are
small and fixed: https://github.com/farsightsec/fstrm (control frames) and
dnstap.proto (Dnstap.message = 14, Dnstap.type = 15; Message fields below).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from soak.clock import NS_PER_S
from soak.errors import InputError
from soak.traffic.capture_file import TCP, UDP, Builder

CONTENT_TYPE = b"protobuf:dnstap.Dnstap"
CTRL_ACCEPT, CTRL_START, CTRL_STOP, CTRL_READY, CTRL_FINISH = 1, 2, 3, 4, 5
FIELD_CONTENT_TYPE = 1
ESCAPE = b"\0\0\0\0"
# dnstap.proto Message.Type and the fields we read
AUTH_QUERY, AUTH_RESPONSE, CLIENT_QUERY, CLIENT_RESPONSE = 1, 2, 5, 6
# A query the server received from its client: CLIENT_QUERY from a recursive server's
# client, AUTH_QUERY from an authoritative server's. BIND logs a query as AUTH_QUERY
# unless recursion is available to its client and the query asks for it (RD): an
# authoritative BIND's queries are all AUTH_QUERY, and `dnstap { client query; }` alone
# selects none of them (docs/replay.md).
SERVED_QUERIES = (CLIENT_QUERY, AUTH_QUERY)
SERVED_RESPONSES = (CLIENT_RESPONSE, AUTH_RESPONSE)
M_TYPE, M_FAMILY, M_PROTOCOL, M_QADDR, M_QPORT = 1, 2, 3, 4, 6
M_QSEC, M_QNSEC, M_QMSG, M_RSEC, M_RNSEC = 8, 9, 10, 12, 13
PROTO_UDP, PROTO_TCP = 1, 2  # SocketProtocol; DoT, DoH and the rest replay as TCP
# sockaddr_un's sun_path is 108 bytes on Linux, one of them the terminating NUL.
SOCKET_PATH_MAX_BYTES = 107


def is_dnstap(head: bytes) -> bool:
    """A Frame Streams file: an escape, then a START control frame."""
    return len(head) >= 12 and head[:4] == ESCAPE and head[8:12] == CTRL_START.to_bytes(4, "big")


def control_frame(ctype: int, content_type: bytes | None = CONTENT_TYPE) -> bytes:
    body = ctype.to_bytes(4, "big")
    if content_type is not None:
        body += FIELD_CONTENT_TYPE.to_bytes(4, "big") + len(content_type).to_bytes(4, "big")
        body += content_type
    return ESCAPE + len(body).to_bytes(4, "big") + body


# ----------------------------------------------------------------- protobuf


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("varint runs past the message")
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7


def fields(buf: bytes) -> dict[int, int | bytes]:
    """A protobuf message's fields (the last of a repeated one); ValueError if malformed."""
    out: dict[int, int | bytes] = {}
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wtype = key >> 3, key & 7
        value: int | bytes
        if wtype == 0:
            value, pos = _varint(buf, pos)
        elif wtype == 1:
            value, pos = int.from_bytes(buf[pos : pos + 8], "little"), pos + 8
        elif wtype == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wtype == 5:
            value, pos = int.from_bytes(buf[pos : pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"wire type {wtype}")
        if pos > len(buf):
            raise ValueError("field runs past the message")
        out[number] = value
    return out


@dataclass
class Frames:
    """What one Frame Streams source held: data frames and whether it ended properly."""

    data: list[bytes]
    stopped: bool


def read_frames(blob: bytes, where: str) -> Frames:
    """A Frame Streams file (unidirectional: START, data frames, STOP)."""
    if not is_dnstap(blob):
        raise InputError(f"{where}: not a dnstap (Frame Streams) file")
    pos, end = 0, len(blob)
    data: list[bytes] = []
    while pos < end:
        if end - pos < 4:
            raise InputError(f"{where}: truncated dnstap: a frame length cut short at {pos}")
        size = int.from_bytes(blob[pos : pos + 4], "big")
        pos += 4
        if size == 0:  # a control frame
            if end - pos < 4:
                raise InputError(f"{where}: truncated dnstap: a control frame cut short")
            csize = int.from_bytes(blob[pos : pos + 4], "big")
            if end - pos - 4 < csize or csize < 4:
                raise InputError(f"{where}: truncated dnstap: a control frame cut short")
            ctype = int.from_bytes(blob[pos + 4 : pos + 8], "big")
            pos += 4 + csize
            if ctype == CTRL_STOP:
                return Frames(data, True)
            continue
        if end - pos < size:
            raise InputError(f"{where}: truncated dnstap: a frame cut short at byte {pos}")
        data.append(blob[pos : pos + size])
        pos += size
    return Frames(data, False)


def add_frame(frame: bytes, builder: Builder) -> None:
    """One dnstap frame: a query the server received into the builder, its response
    counted."""
    try:
        top = fields(frame)
        msg = top.get(14)
        if not isinstance(msg, bytes):
            builder.skipped += 1
            return
        m = fields(msg)
    except ValueError:
        builder.skipped += 1
        return
    mtype = m.get(M_TYPE)
    if mtype in SERVED_RESPONSES:
        builder.responses += 1
        return
    query = m.get(M_QMSG)
    if mtype not in SERVED_QUERIES or not isinstance(query, bytes):
        builder.skipped += 1  # the server's own queries upstream: not a client's
        return
    addr = m.get(M_QADDR, b"")
    client = str(ipaddress.ip_address(addr)) if isinstance(addr, bytes) and addr else "?"
    port = m.get(M_QPORT, 0)
    sec, nsec = m.get(M_QSEC, 0), m.get(M_QNSEC, 0)
    assert isinstance(sec, int) and isinstance(nsec, int)
    transport = UDP if m.get(M_PROTOCOL, PROTO_UDP) == PROTO_UDP else TCP
    builder.add(sec * NS_PER_S + nsec, client, port, transport, query)


def read_dnstap(path: Path, by_port: bool = False) -> Builder:
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    frames = read_frames(blob, str(path))
    if not frames.stopped:
        raise InputError(f"{path}: truncated dnstap: no STOP frame at the end")
    builder = Builder(f"dnstap:{path.name}", by_port)
    for frame in frames.data:
        add_frame(frame, builder)
    return builder


# ----------------------------------------------------------------- the socket


class Listener:
    """A Frame Streams socket a DNS server writes dnstap to (bidirectional: the server
    says READY, we ACCEPT, it STARTs, sends data frames, and STOPs, we FINISH). Each
    connection is read to its end; the server reconnects by itself if it restarts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if len(os.fsencode(path)) > SOCKET_PATH_MAX_BYTES:
            raise InputError(
                f"dnstap socket {path}: {len(os.fsencode(path))} bytes, more than the"
                f" {SOCKET_PATH_MAX_BYTES} a unix socket path may hold: choose a shorter path"
            )
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.bind(str(path))
        except OSError as exc:
            self.sock.close()
            raise InputError(f"dnstap socket {path}: {exc.strerror or exc}") from None
        os.chmod(path, 0o777)  # the server may run as its own user
        self.sock.listen(8)
        # What the writers did, read by whoever watches a recording from another thread
        # (soak.runs.capture_dnstap turns changes into a run's events).
        self.connected = 0  # writer connections accepted
        self.stopped = 0  # ... that ended with STOP (the writer closed its stream)
        self.lost = 0  # ... that ended without STOP (the writer died or dropped it)
        self.frames = 0  # data frames received
        self.last_frame_mono_ns = 0  # time.monotonic_ns() of the last data frame
        self._said_stop: set[socket.socket] = set()

    @property
    def open_connections(self) -> int:
        return self.connected - self.stopped - self.lost

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def record(
        self, duration_s: float, builder: Builder, stop: Callable[[], bool] | None = None
    ) -> int:
        """Frames received for `duration_s` seconds, or until `stop()` says so (every
        connection); how many."""
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        buffers: dict[socket.socket, bytearray] = {}
        count = 0
        end = time.monotonic() + duration_s
        try:
            while (left := end - time.monotonic()) > 0 and not (stop and stop()):
                for key, _ in sel.select(min(left, 0.2)):
                    s = key.fileobj
                    assert isinstance(s, socket.socket)
                    if s is self.sock:
                        conn, _addr = self.sock.accept()
                        conn.setblocking(False)
                        buffers[conn] = bytearray()
                        sel.register(conn, selectors.EVENT_READ)
                        self.connected += 1
                        continue
                    got = _recv(s)
                    if got is None:
                        sel.unregister(s)
                        self._closed(s)
                        buffers.pop(s, None)
                        continue
                    buffers[s] += got
                    count += self._frames(s, buffers[s], builder)
        finally:
            for s in buffers:
                self._closed(s)
            sel.close()
        return count

    def _closed(self, s: socket.socket) -> None:
        """A writer's connection ends: with its STOP said, or lost."""
        if s in self._said_stop:
            self._said_stop.discard(s)
            self.stopped += 1
        else:
            self.lost += 1
        s.close()

    def _frames(self, s: socket.socket, buf: bytearray, builder: Builder) -> int:
        """Complete frames at the start of `buf` (consumed); control frames answered."""
        count = 0
        while len(buf) >= 4:
            size = int.from_bytes(buf[:4], "big")
            if size == 0:
                if len(buf) < 8:
                    break
                csize = int.from_bytes(buf[4:8], "big")
                if len(buf) < 8 + csize:
                    break
                ctype = int.from_bytes(buf[8:12], "big")
                del buf[: 8 + csize]
                if ctype == CTRL_READY:
                    s.sendall(control_frame(CTRL_ACCEPT))
                elif ctype == CTRL_STOP:
                    self._said_stop.add(s)
                    with contextlib.suppress(OSError):  # a writer that left at once
                        s.sendall(control_frame(CTRL_FINISH, None))
                continue
            if len(buf) < 4 + size:
                break
            add_frame(bytes(buf[4 : 4 + size]), builder)
            del buf[: 4 + size]
            count += 1
            self.frames += 1
            self.last_frame_mono_ns = time.monotonic_ns()
        return count


def _recv(s: socket.socket) -> bytes | None:
    try:
        data = s.recv(1 << 16)
    except BlockingIOError:
        return b""
    except OSError:
        return None
    return data or None


def file_bytes(frames: list[bytes]) -> bytes:
    """A unidirectional Frame Streams file holding `frames` (what dnstap tools write)."""
    parts = [control_frame(CTRL_START)]
    parts += [len(f).to_bytes(4, "big") + f for f in frames]
    parts.append(control_frame(CTRL_STOP, None))
    return b"".join(parts)
