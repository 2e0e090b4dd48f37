"""Differences between two corpus answers (old snapshot, new), by category. Pure.

In the spirit of respdiff: each question whose answers differ gets one category,
the most telling one that applies, in this order:

- `no_reply`: one side gave no reply (timeout, refused);
- `rcode`: the rcode changed;
- `answers`: the set of answer records (owner, type, rdata) changed;
- `ttl`: the same records with other TTLs only;
- `flags`: the same answer with other header flags (AA, TC, RD, RA, AD, CD).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

CATEGORIES = ("no_reply", "rcode", "answers", "ttl", "flags")
MESSAGE_EXAMPLES = 20  # differences quoted in the failure message; the JSON has all


@dataclass(frozen=True)
class Difference:
    query: str
    category: str
    before: str
    after: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    def describe(self) -> str:
        return f"{self.query}: {self.category} {self.before} -> {self.after}"


def _rrs(record: dict[str, Any]) -> str:
    return "[" + ", ".join(rr for rr, _ in record["answers"]) + "]"


def _ttls(record: dict[str, Any]) -> str:
    return "[" + ", ".join(f"{rr} ttl {ttl}" for rr, ttl in record["answers"]) + "]"


def difference(before: dict[str, Any], after: dict[str, Any]) -> Difference | None:
    query = str(before.get("q") or after.get("q") or "?")
    if "error" in before or "error" in after:
        if before.get("error") == after.get("error"):
            return None  # no reply either time: not a change the upgrade made
        return Difference(
            query,
            "no_reply",
            before.get("error") or before["rcode"],
            after.get("error") or after["rcode"],
        )
    if before["rcode"] != after["rcode"]:
        return Difference(query, "rcode", before["rcode"], after["rcode"])
    rrs_before = sorted(rr for rr, _ in before["answers"])
    rrs_after = sorted(rr for rr, _ in after["answers"])
    if rrs_before != rrs_after:
        return Difference(query, "answers", _rrs(before), _rrs(after))
    if sorted(map(tuple, before["answers"])) != sorted(map(tuple, after["answers"])):
        return Difference(query, "ttl", _ttls(before), _ttls(after))
    if before["flags"] != after["flags"]:
        return Difference(query, "flags", " ".join(before["flags"]), " ".join(after["flags"]))
    return None


def compare(
    before: list[dict[str, Any]], after: list[dict[str, Any]], ignore: Sequence[str] = ()
) -> list[Difference]:
    """Differences of the same questions, in order; categories in `ignore` are not kept."""
    out = []
    for b, a in zip(before, after, strict=True):
        diff = difference(b, a)
        if diff is not None and diff.category not in ignore:
            out.append(diff)
    return out


def counts(differences: list[Difference]) -> dict[str, int]:
    by = Counter(d.category for d in differences)
    return {c: by[c] for c in CATEGORIES if by[c]}


def summary(differences: list[Difference], asked: int) -> str:
    if not differences:
        return f"no differences in {asked} answers"
    per = ", ".join(f"{c} {n}" for c, n in counts(differences).items())
    shown = "; ".join(d.describe() for d in differences[:MESSAGE_EXAMPLES])
    more = len(differences) - MESSAGE_EXAMPLES
    tail = f"; ... and {more} more (all in the JSON)" if more > 0 else ""
    return f"{len(differences)} of {asked} answers differ ({per}): {shown}{tail}"
