"""Counts in words, as every message and table says them: "1 phase", "4 criteria"."""

from __future__ import annotations

# Nouns whose plural is not the noun and an s.
_IRREGULAR = {"criterion": "criteria"}


def plural(count: float, noun: str) -> str:
    """`noun` as `count` of it is said (the count itself not included)."""
    return noun if count == 1 else _IRREGULAR.get(noun, noun + "s")


def counted(count: int, noun: str) -> str:
    """ "1 phase", "2 phases", "1,000 runs": the count with thousands separators."""
    return f"{count:,} {plural(count, noun)}"
