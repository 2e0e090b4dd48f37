"""Counts in words, as every message and table says them: "1 phase", "4 criteria"."""

from __future__ import annotations

# Nouns whose plural is not the noun and an s.
_IRREGULAR = {"criterion": "criteria", "entry": "entries"}


def plural(count: float, noun: str) -> str:
    """`noun` as `count` of it is said (the count itself not included)."""
    return noun if count == 1 else _IRREGULAR.get(noun, noun + "s")


def loops_text(loops: float) -> str:
    """ "1 loop", "2.67 loops": a share of a replay's capture played, to two decimals."""
    shown = round(loops, 2)
    return f"{shown:,g} {plural(shown, 'loop')}"


def counted(count: int, noun: str) -> str:
    """ "1 phase", "2 phases", "1,000 runs": the count with thousands separators."""
    return f"{count:,} {plural(count, noun)}"


# (seconds, unit), the largest first.
_AGE_UNITS = ((7 * 86400, "week"), (86400, "day"), (3600, "hour"), (60, "minute"), (1, "second"))


def duration_words(seconds: float) -> str:
    """An age as a user wrote it: "1 minute", "30 days", "90 minutes", "2.5 seconds"; in
    the largest unit it is a whole number of."""
    for size_s, unit in _AGE_UNITS:
        if seconds >= size_s and seconds % size_s == 0:
            return counted(int(seconds // size_s), unit)
    return f"{seconds:g} {plural(seconds, 'second')}"
