"""Soak's capture file: the client queries of a server, compact, in time order.

Layout (all integers big-endian):

    MAGIC                       8 bytes, "SOAKCAP1"
    header length, header       4 bytes, then JSON: source, clients (their original
                                addresses), queries, duration_ns
    records, each               RECORD (offset_ns, client, conn, flags, qtype,
                                transport, qname length), then the qname in wire form

`offset_ns` counts from the first query; `client` indexes the header's clients;
`conn` numbers a client's TCP connections (0 for UDP) so that a replay opens a
new connection where the capture did. A file cut short ends mid-record: the
reader says so (bad input) rather than replaying part of it unannounced.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import dns.rdatatype

from soak.clock import ns_to_s
from soak.errors import InputError

MAGIC = b"SOAKCAP1"
RECORD = struct.Struct("!QIIHHBB")
UDP, TCP = 0, 1
TRANSPORTS = ("udp", "tcp")


@dataclass(frozen=True, slots=True)
class Query:
    """One client query as captured."""

    offset_ns: int  # after the capture's first query
    client: int
    conn: int  # the client's connection number (TCP); 0 for UDP
    flags: int  # the header's 16 flag bits (RD, CD, AD, opcode ...)
    qtype: int
    transport: int  # UDP or TCP
    qname: bytes  # wire form, lower case kept as captured


@dataclass
class Capture:
    """A whole capture in memory: what the replay plans from."""

    source: str
    clients: list[str]
    queries: list[Query]

    @property
    def duration_ns(self) -> int:
        return self.queries[-1].offset_ns if self.queries else 0


def write_capture(path: Path, capture: Capture) -> None:
    header = {
        "source": capture.source,
        "clients": capture.clients,
        "queries": len(capture.queries),
        "duration_ns": capture.duration_ns,
    }
    blob = json.dumps(header).encode()
    # Whole or not at all: a reader (a replay, a run in progress) never meets half a file.
    part = path.with_name(path.name + ".part")
    with part.open("wb") as f:
        f.write(MAGIC + len(blob).to_bytes(4, "big") + blob)
        f.write(b"".join(_record(q) for q in capture.queries))
    os.replace(part, path)


def _record(q: Query) -> bytes:
    head = RECORD.pack(q.offset_ns, q.client, q.conn, q.flags, q.qtype, q.transport, len(q.qname))
    return head + q.qname


def is_capture(head: bytes) -> bool:
    return head.startswith(MAGIC)


def read_capture(path: Path) -> Capture:
    """The whole file; InputError (one line) when it is not one, or cut short."""
    try:
        with path.open("rb") as f:
            header = _header(f, path)
            data = f.read()
    except OSError as exc:
        raise InputError(f"cannot read capture {path}: {exc.strerror or exc}") from None
    queries = list(_records(data, path))
    clients = header.get("clients")
    if not isinstance(clients, list):
        raise InputError(f"{path}: capture header without its clients")
    if len(queries) != header.get("queries"):
        raise InputError(
            f"{path}: truncated capture: {len(queries)} of {header.get('queries')} queries"
        )
    if not queries:
        raise InputError(f"{path}: the capture holds no DNS queries")
    return Capture(str(header.get("source", "")), [str(c) for c in clients], queries)


def _header(f: BinaryIO, path: Path) -> dict[str, object]:
    head = f.read(len(MAGIC) + 4)
    if not head.startswith(MAGIC):
        raise InputError(f"{path}: not a soak capture")
    if len(head) < len(MAGIC) + 4:
        raise InputError(f"{path}: truncated capture (no header)")
    size = int.from_bytes(head[len(MAGIC) :], "big")
    blob = f.read(size)
    try:
        header = json.loads(blob)
    except ValueError:
        raise InputError(f"{path}: truncated capture (header cut short)") from None
    if not isinstance(header, dict):
        raise InputError(f"{path}: capture header is not an object")
    return header


def _records(data: bytes, path: Path) -> Iterator[Query]:
    pos, end, size = 0, len(data), RECORD.size
    # A capture repeats its names: one bytes object per distinct name, not per query
    # (a 10-minute capture held in memory for a day's replay).
    names: dict[bytes, bytes] = {}
    while pos < end:
        if end - pos < size:
            raise InputError(f"{path}: truncated capture: a record cut short at byte {pos}")
        offset, client, conn, flags, qtype, transport, nlen = RECORD.unpack_from(data, pos)
        pos += size
        if end - pos < nlen:
            raise InputError(f"{path}: truncated capture: a name cut short at byte {pos}")
        qname = data[pos : pos + nlen]
        yield Query(offset, client, conn, flags, qtype, transport, names.setdefault(qname, qname))
        pos += nlen


class Builder:
    """Collects queries as sources find them (any order) into a Capture: clients
    numbered by first appearance, connections per client, offsets from the first query."""

    def __init__(self, source: str, by_port: bool = False, max_queries: int | None = None) -> None:
        self.source = source
        # A client is a source address; with by_port an address and port (clients
        # behind one address, or load generators on loopback, tell apart that way).
        self.by_port = by_port
        self.responses = 0  # DNS responses seen (a capture of these only is bad input)
        self.skipped = 0  # packets that were DNS-like but unusable (say so, drop none silently)
        # Memory is bounded: past `max_queries` queries are counted, not kept.
        self.max_queries = max_queries
        self.over_max = 0
        # Queries at or after `until_ns` (their own time) are counted, not kept: a
        # recording that covers a span (soak.runs.capture_dnstap) sets it once it knows it.
        self.until_ns: int | None = None
        self.after_end = 0
        self._raw: list[tuple[int, str, object, int, int, int, bytes]] = []

    def add(
        self, time_ns: int, client: str, conn_key: object, transport: int, message: bytes
    ) -> None:
        """One DNS message from `client` (`conn_key`: its UDP source port, or which TCP
        connection); queries are kept, responses counted."""
        parsed = parse_query(message)
        if parsed is None:
            if is_response(message):
                self.responses += 1
            else:
                self.skipped += 1
            return
        flags, qtype, qname = parsed
        if self.until_ns is not None and time_ns >= self.until_ns:
            self.after_end += 1
            return
        if self.max_queries is not None and len(self._raw) >= self.max_queries:
            self.over_max += 1
            return
        if self.by_port and transport == UDP:
            client = f"{client}#{conn_key}"
        self._raw.append((time_ns, client, conn_key, transport, flags, qtype, qname))

    def drop_before(self, since_ns: int) -> int:
        """The queries timed before `since_ns` dropped (a run's readiness probes, before
        its origin); how many."""
        kept = [r for r in self._raw if r[0] >= since_ns]
        dropped = len(self._raw) - len(kept)
        self._raw = kept
        return dropped

    def capture(self) -> Capture:
        self._raw.sort(key=lambda r: r[0])
        clients: dict[str, int] = {}
        conns: dict[tuple[str, object], int] = {}
        per_client_conns: dict[str, int] = {}
        out = []
        names: dict[bytes, bytes] = {}  # one object per distinct name, as _records
        first = self._raw[0][0] if self._raw else 0
        for time_ns, client, conn_key, transport, flags, qtype, qname in self._raw:
            cid = clients.setdefault(client, len(clients))
            conn = 0
            if transport == TCP:
                key = (client, conn_key)
                if key not in conns:
                    conns[key] = per_client_conns.get(client, 0)
                    per_client_conns[client] = conns[key] + 1
                conn = conns[key]
            qname = names.setdefault(qname, qname)
            out.append(Query(time_ns - first, cid, conn, flags, qtype, transport, qname))
        return Capture(self.source, list(clients), out)

    def __len__(self) -> int:
        return len(self._raw)


def is_response(message: bytes) -> bool:
    return len(message) >= 12 and bool(message[2] & 0x80)


def parse_query(message: bytes) -> tuple[int, int, bytes] | None:
    """(flags, qtype, qname in wire form) of a standard query with one question, else
    None. The name must be uncompressed, as every query's is."""
    if len(message) < 17 or message[2] & 0x80:
        return None
    if (message[2] >> 3) & 15 != 0 or message[4:6] != b"\0\1":  # opcode QUERY, QDCOUNT 1
        return None
    pos, end = 12, len(message)
    while True:
        if pos >= end:
            return None
        n = message[pos]
        if n == 0:
            pos += 1
            break
        if n > 63 or pos + 1 + n > end:
            return None
        pos += 1 + n
    if pos + 4 > end or pos - 12 > 255:
        return None
    qname = message[12:pos]
    qtype = (message[pos] << 8) | message[pos + 1]
    flags = (message[2] << 8) | message[3]
    return flags, qtype, qname


def qname_text(qname: bytes) -> str:
    """A wire-form name as text with a trailing dot (for reports and classes)."""
    labels, pos = [], 0
    while qname[pos]:
        n = qname[pos]
        labels.append(qname[pos + 1 : pos + 1 + n].decode("ascii", "backslashreplace"))
        pos += 1 + n
    return ".".join(labels) + "."


def summary(capture: Capture) -> dict[str, object]:
    """What a user checks after `soak capture`: counts per qtype and transport."""
    from collections import Counter

    qtypes = Counter(q.qtype for q in capture.queries)
    transports = Counter(TRANSPORTS[q.transport] for q in capture.queries)
    return {
        "queries": len(capture.queries),
        "clients": len(capture.clients),
        "duration_s": round(ns_to_s(capture.duration_ns), 3),
        # By name (A, AAAA), as a run's record and the replay's classes say them.
        "qtypes": {
            dns.rdatatype.to_text(dns.rdatatype.RdataType(t)): n for t, n in qtypes.most_common()
        },
        "transports": dict(transports),
    }
