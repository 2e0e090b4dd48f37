"""Query sources: dnsperf-format files, inline lists and seeded random labels.

Everything here runs before the load starts. Questions are encoded to wire form
(wire.py) once, so the hot loop only patches the 2-byte id. Pure parsing apart from
reading the file.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import dns.exception
import dns.name
import dns.rdatatype

from soak.errors import InputError
from soak.load import wire

if TYPE_CHECKING:  # workers unpickle ClassQueries without importing pydantic
    from soak.load.load_config import QueryClass, RandomNames


@dataclass(frozen=True)
class Question:
    name: str
    rdtype: int


def parse_line(line: str, where: str) -> Question | None:
    """One dnsperf line: `name TYPE`, a bare name means A; blank and `#` lines give None."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    parts = text.split()
    if len(parts) > 2:
        raise InputError(f"{where}: malformed query line {text!r} (want `name TYPE`)")
    type_text = parts[1] if len(parts) == 2 else "A"
    rdtype = rdtype_of(type_text.upper())
    if rdtype is None:
        raise InputError(f"{where}: unknown record type {type_text!r}")
    if wire.plain_name(parts[0]) is None:  # escapes, non-ASCII or bad: dnspython decides
        try:
            dns.name.from_text(parts[0])
        except dns.exception.DNSException as exc:
            raise InputError(f"{where}: malformed name {parts[0]!r}: {exc}") from None
    return Question(parts[0], rdtype)


@functools.lru_cache(maxsize=256)
def rdtype_of(text: str) -> int | None:
    """The record type's number from its upper-case name (`AAAA`), None if unknown."""
    try:
        return int(dns.rdatatype.from_text(text))
    except dns.rdatatype.UnknownRdatatype:
        return None


def parse_lines(lines: Iterable[str], source: str) -> list[Question]:
    questions = []
    for number, line in enumerate(lines, start=1):
        q = parse_line(line, f"{source} line {number}")
        if q is not None:
            questions.append(q)
    if not questions:
        raise InputError(f"{source}: no queries")
    return questions


def read_query_file(path: Path) -> list[Question]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read query file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        where = f"byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
        raise InputError(f"query file {path}: not UTF-8 text ({where})") from None
    return parse_lines(text.splitlines(), str(path))


def encode_question(q: Question) -> bytes:
    """The question section in wire form (no compression, no EDNS)."""
    name_wire = wire.plain_name(q.name) or dns.name.from_text(q.name).to_wire()
    assert name_wire is not None
    return wire.question(name_wire, q.rdtype)


class RandomSource:
    """`<random label>.<zone>` names, fresh every query, repeatable from the seed."""

    def __init__(self, spec: RandomNames, seed: int) -> None:
        try:
            zone = dns.name.from_text(spec.zone).to_wire()
            rdtype = int(dns.rdatatype.from_text(spec.type.upper()))
        except dns.rdatatype.UnknownRdatatype:
            raise InputError(f"random names: unknown record type {spec.type!r}") from None
        except dns.exception.DNSException as exc:
            raise InputError(f"random names: malformed zone {spec.zone!r}: {exc}") from None
        assert zone is not None
        self._rng = random.Random(seed)
        self._length = spec.label_length
        self._bits = 4 * spec.label_length
        self._prefix = bytes([spec.label_length])
        self._suffix = wire.question(zone, rdtype)

    def next_question(self) -> bytes:
        label = b"%0*x" % (self._length, self._rng.getrandbits(self._bits))
        return self._prefix + label + self._suffix


@dataclass
class ClassQueries:
    """One mix class ready for the hot loop: fixed questions or a random source."""

    name: str
    weight: float
    questions: list[bytes] = field(default_factory=list)
    random: RandomSource | None = None
    expect_rcodes: frozenset[int] | None = None
    expect_addresses: frozenset[bytes] | None = None  # packed A/AAAA rdata


def class_questions(qc: QueryClass, base_dir: Path) -> list[Question]:
    if qc.file is not None:
        path = qc.file if qc.file.is_absolute() else base_dir / qc.file
        return read_query_file(path)
    assert qc.queries is not None
    return parse_lines(qc.queries, f"class {qc.name!r} queries")


def parse_expect(qc: QueryClass) -> tuple[frozenset[int] | None, frozenset[bytes] | None]:
    import ipaddress

    import dns.rcode

    rcodes = None
    addresses = None
    if qc.expect is not None and qc.expect.rcodes is not None:
        try:
            rcodes = frozenset(int(dns.rcode.from_text(r.upper())) for r in qc.expect.rcodes)
        except dns.rcode.UnknownRcode as exc:
            raise InputError(f"class {qc.name!r}: unknown rcode in expect: {exc}") from None
    if qc.expect is not None and qc.expect.addresses is not None:
        try:
            addresses = frozenset(ipaddress.ip_address(a).packed for a in qc.expect.addresses)
        except ValueError as exc:
            raise InputError(f"class {qc.name!r}: {exc}") from None
    return rcodes, addresses


def build_classes(mix: Sequence[QueryClass], base_dir: Path, seed: int) -> list[ClassQueries]:
    """Parse and encode every class of a mix; input errors name the file and line."""
    names = [qc.name for qc in mix]
    if len(set(names)) != len(names) or "all" in names:
        raise InputError(f"mix class names must be unique and not 'all': {names}")
    out = []
    for index, qc in enumerate(mix):
        rcodes, addresses = parse_expect(qc)
        cq = ClassQueries(qc.name, qc.weight, expect_rcodes=rcodes, expect_addresses=addresses)
        if qc.random is not None:
            cq.random = RandomSource(qc.random, seed * 1000 + index)
        else:
            # Repeated lines share one bytes object: big files repeat hot names a lot.
            seen: dict[Question, bytes] = {}
            cq.questions = [
                seen[q] if q in seen else seen.setdefault(q, encode_question(q))
                for q in class_questions(qc, base_dir)
            ]
        out.append(cq)
    return out


def mix_schedule(weights: Sequence[float], length: int = 1000) -> list[int]:
    """Class indexes in a repeating order whose counts follow the weights.

    Smooth weighted round robin: deterministic, exact proportions over the
    cycle and the classes interleaved rather than sent in blocks.
    """
    if not weights or any(w <= 0 for w in weights):
        raise ValueError("weights must be positive")
    total = sum(weights)
    current = [0.0] * len(weights)
    order = []
    for _ in range(length):
        for i, w in enumerate(weights):
            current[i] += w
        best = max(range(len(weights)), key=lambda i: current[i])
        current[best] -= total
        order.append(best)
    return order
