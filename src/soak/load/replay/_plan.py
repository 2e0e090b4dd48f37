"""The replay's schedule: each captured query's send time in each loop, its client,
its connection and its name (rewritten when the loop says so), and its ledger class.

Pure and lazy: a loop is generated as it is sent, so a day's replay of a short
capture holds one capture in memory, not a day of queries.
"""

from __future__ import annotations

import array
import bisect
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

import dns.name
import dns.rdatatype

from soak.clock import NS_PER_S
from soak.errors import InputError
from soak.load import wire
from soak.load.queries import rdtype_of
from soak.traffic.capture_file import Capture, qname_text
from soak.traffic.replay_config import ReplayConfig, Rewrite

OTHER = "other"


@dataclass(frozen=True, slots=True)
class Planned:
    """One query to send: `due_ns` after the replay's origin."""

    due_ns: int
    loop: int
    client: int
    conn: int
    transport: int  # capture.UDP or TCP (the capture's; the config may override)
    flags: int
    question: bytes  # wire form: name, type, class IN
    cls: int
    index: int  # the captured query's (its place in the capture's order)


def speed_of(cfg: ReplayConfig, capture: Capture) -> float:
    """How much faster than captured: `speed`, or `rate_qps` over the capture's mean rate."""
    if cfg.rate_qps is not None:
        mean_qps = len(capture.queries) * NS_PER_S / loop_ns(capture)
        return cfg.rate_qps / mean_qps
    return cfg.speed or 1.0


def loop_ns(capture: Capture) -> int:
    """A loop's length at speed 1: the capture's span plus one mean gap, so that the
    next loop's first query follows the last as the capture's queries follow each other."""
    n = len(capture.queries)
    span = capture.duration_ns
    if n < 2 or span == 0:
        return NS_PER_S
    return span + span // (n - 1)


class Classes:
    """Which ledger class a query is in: the config's classes (first match, then
    OTHER), or one per query type seen in the capture."""

    def __init__(self, cfg: ReplayConfig, capture: Capture) -> None:
        self.by_type = cfg.classes is None
        if cfg.classes is None:
            types = sorted({q.qtype for q in capture.queries})
            self.names = [dns.rdatatype.to_text(t) for t in types]  # type: ignore[arg-type]
            self._index = {t: i for i, t in enumerate(types)}
            return
        self.names = [c.name for c in cfg.classes]
        if OTHER not in self.names:
            self.names.append(OTHER)
        if len(set(self.names)) != len(self.names):
            raise InputError(f"replay class names must be unique: {self.names}")
        self._rules = [
            (
                None if c.qtypes is None else {_rdtype(t) for t in c.qtypes},
                None if c.pattern is None else re.compile(c.pattern, re.IGNORECASE),
            )
            for c in cfg.classes
        ]

    def of(self, qtype: int, qname: bytes) -> int:
        if self.by_type:
            return self._index[qtype]
        text: str | None = None
        for i, (types, pattern) in enumerate(self._rules):
            if types is not None and qtype not in types:
                continue
            if pattern is not None:
                text = text or qname_text(qname)
                if not pattern.search(text):
                    continue
            return i
        return len(self.names) - 1


def _rdtype(text: str) -> int:
    if (rdtype := rdtype_of(text.upper())) is None:
        raise InputError(f"replay class: unknown record type {text!r}")
    return rdtype


class Renamer:
    """Rewrite's names: `<label>.<zone>`, the label and zone from a hash of (seed, loop,
    name), so the same seed gives the same names and each loop new ones."""

    def __init__(self, rewrite: Rewrite, seed: int) -> None:
        # Each a name, and short enough for a label under it (Rewrite checked both).
        self.zones = [dns.name.from_text(z).to_wire() or b"\0" for z in rewrite.zones]
        self.from_loop = rewrite.from_loop
        self.length = rewrite.label_length
        self.seed = seed.to_bytes(8, "big", signed=True)
        self._loop = -1
        self._names: dict[bytes, bytes] = {}

    def name(self, loop: int, qname: bytes) -> bytes:
        if loop < self.from_loop:
            return qname
        if loop != self._loop:  # a new loop: new names (the old ones are not needed again)
            self._loop, self._names = loop, {}
        got = self._names.get(qname)
        if got is None:
            digest = hashlib.blake2b(
                qname, digest_size=16, key=self.seed + loop.to_bytes(8, "big")
            ).digest()
            label = digest.hex()[: self.length].encode()
            zone = self.zones[digest[-1] % len(self.zones)]
            got = self._names[qname] = bytes([len(label)]) + label + zone
        return got


def shared_questions(capture: Capture) -> list[bytes]:
    """Each captured query's question in wire form, one object per distinct question:
    a capture repeats its names, and a copy per query (55 bytes each) was a third of
    the plan's and the capture's memory (600,000 queries of 5 names: 31.5 MiB)."""
    seen: dict[tuple[bytes, int], bytes] = {}
    questions = []
    for q in capture.queries:
        question = seen.get((q.qname, q.qtype))
        if question is None:
            question = seen[q.qname, q.qtype] = wire.question(q.qname, q.qtype)
        questions.append(question)
    return questions


class Plan:
    """The replay's queries, loop after loop, until `end_ns` (after the origin) or `loops`."""

    def __init__(self, cfg: ReplayConfig, capture: Capture, seed: int) -> None:
        self.capture = capture
        self.speed = speed_of(cfg, capture)
        self.period_ns = int(loop_ns(capture) / self.speed)
        self.classes = Classes(cfg, capture)
        self.renamer = Renamer(cfg.rewrite, seed) if cfg.rewrite is not None else None
        self.loops = cfg.loops
        # The question of each captured query, encoded once (rewritten ones per loop).
        self._questions = shared_questions(capture)
        self._cls = [self.classes.of(q.qtype, q.qname) for q in capture.queries]
        # Which transports the capture's queries came over (capture.UDP, TCP): which
        # compiled loops play it (_engine.loops_of), read once.
        self.transports = frozenset(q.transport for q in capture.queries)

    @property
    def rate_qps(self) -> float:
        return len(self.capture.queries) * NS_PER_S / self.period_ns

    def queries(self, end_ns: int | None, start_ns: int = 0) -> Iterator[Planned]:
        """Loop after loop until `end_ns` or the config's loops; without either, one. From
        `start_ns` (after the origin) if given: the first query due at or after it, in the
        loop it falls in, so that the loop numbers and the rewritten names are those a
        replay from the origin would have sent there."""
        loop, first = self.position(start_ns)
        speed = self.speed
        loops = self.loops_until(end_ns)
        while loops is None or loop < loops:
            base = loop * self.period_ns
            if end_ns is not None and base >= end_ns:
                return
            queries = self.capture.queries
            for i, q in enumerate(queries[first:] if first else queries, first):
                due = base + int(q.offset_ns / speed)
                if end_ns is not None and due >= end_ns:
                    return
                question = self.question(loop, i)
                yield Planned(
                    due, loop, q.client, q.conn, q.transport, q.flags, question, self._cls[i], i
                )
            loop, first = loop + 1, 0

    def loops_until(self, end_ns: int | None) -> int | None:
        """How many loops a replay until `end_ns` plays (None: as many as fit)."""
        return self.loops if self.loops is not None or end_ns is not None else 1

    def question(self, loop: int, i: int) -> bytes:
        """The question the capture's query `i` asks in `loop` (its name rewritten there
        if the config says so)."""
        renamer = self.renamer
        if renamer is not None and loop >= renamer.from_loop:
            q = self.capture.queries[i]
            return wire.question(renamer.name(loop, q.qname), q.qtype)
        return self._questions[i]

    def questions(self, loop: int, first: int, end: int) -> list[bytes]:
        """The questions of the capture's queries `first` to `end` (excluded) in `loop`."""
        if self.renamer is None or loop < self.renamer.from_loop:
            return self._questions[first:end]
        return [self.question(loop, i) for i in range(first, end)]

    def columns(self, transport: int | None = None) -> bytes:
        """Each captured query's due time in a loop (ns after the loop's start at this
        speed), client, class and flags, as int64s: what the compiled loop reads of the
        plan, with questions() and the loop's start (loop * period_ns). With `transport`
        (capture.UDP or TCP), the other transport's queries have client -1: another
        process plays them (a capture that mixes both, _workers)."""
        speed, out = self.speed, array.array("q")
        for q, cls in zip(self.capture.queries, self._cls, strict=True):
            client = q.client if transport is None or q.transport == transport else -1
            out.extend((int(q.offset_ns / speed), client, cls, q.flags))
        return out.tobytes()

    def planned(self, loop: int, i: int) -> Planned:
        """The capture's query `i` as `loop` plans it (as queries() yields it)."""
        q = self.capture.queries[i]
        due = loop * self.period_ns + int(q.offset_ns / self.speed)
        question = self.question(loop, i)
        return Planned(due, loop, q.client, q.conn, q.transport, q.flags, question, self._cls[i], i)

    def position(self, at_ns: int) -> tuple[int, int]:
        """(loop, index) of the first query due at or after `at_ns` (a loop's end: the
        next loop's first query)."""
        loop, into_ns = divmod(max(at_ns, 0), self.period_ns)
        speed = self.speed
        first = bisect.bisect_left(
            self.capture.queries, into_ns, key=lambda q: int(q.offset_ns / speed)
        )
        if first == len(self.capture.queries):
            return loop + 1, 0
        return loop, first

    def dues(self, loop: int, first: int, end_ns: int) -> Iterator[tuple[int, int]]:
        """(due time, class) of each query from the capture's query `first` of `loop` on,
        until `end_ns`: what a replay that stopped there left unsent (no names made)."""
        queries, speed = self.capture.queries, self.speed
        while self.loops is None or loop < self.loops:
            base = loop * self.period_ns
            for i in range(first, len(queries)):
                due = base + int(queries[i].offset_ns / speed)
                if due >= end_ns:
                    return
                yield due, self._cls[i]
            loop, first = loop + 1, 0
