"""The ledger's arithmetic: one-second windows on the run's grid, counted by due time.

Every query of the schedule belongs to the window of the second it was *due*
(its scheduled send time, `origin + k s`), whatever the machine did with it.
A window holds, per class:

    due        queries the schedule put in this second
    sent       of those, the ones that left
    skipped    of those, the ones that never left: the generator fell more than
               MAX_BACKLOG_S behind, or the load stopped before their turn
    completed  sent and answered within the timeout
    lost       sent and not answered within the timeout (ICMP "connection refused"
               included: `refused` says how many such errors the second saw)
    abandoned  sent on a stream connection the client hung up on purpose
    late       replies after the timeout (their query is already lost)
    wrong      answers outside the class's expectation
    rcodes, lat_us  the answered ones' rcodes and latencies (whole µs -> count)

so that, in every window, `completed + lost + abandoned == sent` and
`sent + skipped == due`. A window is closed when the schedule has passed it and
none of its queries is in flight (each answered, timed out or abandoned); only
closed windows leave a worker, and a window of several workers (or agents) is
closed when each has closed it. Closed windows are the run's ledger: every
figure of a run's load is a sum over them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

CLOSE_ALL = 1 << 62  # a cursor past every second: the load has ended
COUNTS = ("due", "sent", "skipped", "completed", "lost", "abandoned", "late", "wrong", "refused")


@dataclass
class ClassWindow:
    """One class's counts in one window (picklable, plain types)."""

    due: int = 0
    sent: int = 0
    skipped: int = 0
    completed: int = 0
    lost: int = 0
    abandoned: int = 0
    late: int = 0
    wrong: int = 0
    refused: int = 0  # ICMP errors (connection refused) seen in this second
    rcodes: dict[int, int] = field(default_factory=dict)
    lat_us: dict[int, int] = field(default_factory=dict)

    def add(self, other: ClassWindow) -> None:
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for code, n in other.rcodes.items():
            self.rcodes[code] = self.rcodes.get(code, 0) + n
        for us, n in other.lat_us.items():
            self.lat_us[us] = self.lat_us.get(us, 0) + n

    def problems(self) -> list[str]:
        """The invariants this window breaks (empty: none)."""
        out = []
        ended = self.completed + self.lost + self.abandoned
        if ended != self.sent:
            out.append(
                f"completed {self.completed} + lost {self.lost} + abandoned {self.abandoned}"
                f" = {ended} != sent {self.sent}"
            )
        if self.sent + self.skipped != self.due:
            out.append(f"sent {self.sent} + skipped {self.skipped} != due {self.due}")
        answered = sum(self.lat_us.values())
        if answered != self.completed:
            out.append(f"{answered} latencies != completed {self.completed}")
        return out


@dataclass
class Window:
    """One second of the grid (`second`: whole seconds after the origin), per class."""

    second: int
    classes: list[ClassWindow]

    def total(self) -> ClassWindow:
        out = ClassWindow()
        for cw in self.classes:
            out.add(cw)
        return out

    def add(self, other: Window) -> None:
        """Another source's counts of the same second (histograms added)."""
        if other.second != self.second or len(other.classes) != len(self.classes):
            raise ValueError(f"window {other.second} does not merge into {self.second}")
        for mine, theirs in zip(self.classes, other.classes, strict=True):
            mine.add(theirs)

    def problems(self) -> list[str]:
        out = []
        for c, cw in enumerate(self.classes):
            out += [f"second {self.second} class {c}: {p}" for p in cw.problems()]
        return out


def empty_window(second: int, nclasses: int) -> Window:
    return Window(second, [ClassWindow() for _ in range(nclasses)])


def skipped_window(second: int, schedule: Sequence[int], n: int, nclasses: int) -> Window:
    """A second whose `n` due queries never left as far as anyone can tell (their worker
    or agent is gone): due and skipped, classes as the mix schedule deals them."""
    w = empty_window(second, nclasses)
    for cw, k in zip(w.classes, schedule_counts(schedule, 0, n, nclasses), strict=True):
        cw.due = cw.skipped = k
    return w


def schedule_counts(schedule: Sequence[int], start: int, n: int, nclasses: int) -> list[int]:
    """How many of the `n` queries from position `start` of the mix schedule fall to each
    class (the schedule repeats): the class of a query that never left."""
    counts = [0] * nclasses
    slen = len(schedule)
    cycles, rest = divmod(n, slen)
    if cycles:
        for c in schedule:
            counts[c] += cycles
    for i in range(rest):
        counts[schedule[(start + i) % slen]] += 1
    return counts


def sum_windows(windows: Iterable[Window], nclasses: int) -> list[ClassWindow]:
    """Per class, the sum of the windows."""
    out = [ClassWindow() for _ in range(nclasses)]
    for w in windows:
        for acc, cw in zip(out, w.classes, strict=True):
            acc.add(cw)
    return out


class Merger:
    """Closed windows of several sources (workers, agents) merged by grid second.

    A source hands in its windows as it closes them, in order, with the second up
    to which it has closed everything (`closed_below`); a merged second is closed
    once every source still counted has closed it. A source that has ended says so
    (`end`) and no longer holds seconds back.
    """

    def __init__(self, nclasses: int, sources: Iterable[int]) -> None:
        self.nclasses = nclasses
        self._open: dict[int, Window] = {}
        self._below: dict[int, int] = dict.fromkeys(sources, 0)
        self._ended: set[int] = set()
        self._next = 0  # every second below this has been handed out

    def add(self, source: int, windows: Iterable[Window], closed_below: int) -> None:
        for w in windows:
            held = self._open.get(w.second)
            if held is None:
                self._open[w.second] = held = empty_window(w.second, self.nclasses)
            held.add(w)
        self._below[source] = max(self._below.get(source, 0), closed_below)

    def end(self, source: int) -> None:
        self._ended.add(source)

    def below_of(self, source: int) -> int:
        """The second below which `source` has closed everything."""
        return self._below.get(source, 0)

    def closed_below(self) -> int:
        live = [b for s, b in self._below.items() if s not in self._ended]
        if live:
            return min(live)
        return max([*self._open, self._next - 1]) + 1

    def take_closed(self) -> list[Window]:
        """The seconds closed since the last call, in order (empty ones included)."""
        below = self.closed_below()
        out = []
        for second in range(self._next, below):
            held = self._open.pop(second, None)
            out.append(held if held is not None else empty_window(second, self.nclasses))
        self._next = max(self._next, below)
        return out


class OpenWindows:
    """A worker's windows still open, as flat counters for its loops.

    Counters of second `s`, class `c` sit at index `(s & mask) * nclasses + c`
    (`rcodes` 16 to each such index, `lats[s & mask]` a dict of `us * nclasses + c`);
    `seconds[s & mask]` says which second a slot holds (-1: none). `nw` slots, a power
    of two above the longest a window stays open (the backlog the generator may fall
    behind, plus the timeout): a slot still open when its place is wanted again is
    closed by force, its queries in flight counted lost.
    """

    def __init__(self, nclasses: int, nw: int) -> None:
        if nw & (nw - 1) or nw < 2:
            raise ValueError(f"window slots must be a power of two: {nw}")
        self.nc, self.nw, self.mask = nclasses, nw, nw - 1
        n = nw * nclasses
        self.sent, self.completed, self.lost = [0] * n, [0] * n, [0] * n
        self.late, self.wrong, self.abandoned, self.skipped = [0] * n, [0] * n, [0] * n, [0] * n
        self.rcodes = [0] * (16 * n)
        self.lats: list[dict[int, int]] = [{} for _ in range(nw)]
        self.refused = [0] * nw
        self.seconds = [-1] * nw
        self.closed_below = 0  # every second below this has left the worker
        self.forced: list[Window] = []  # closed by force, not yet handed out

    def open(self, second: int) -> int:
        """Slot `second` (closing by force whatever older second held its place); returns
        the index of its class 0. Seconds below closed_below count into closed_below."""
        second = max(second, self.closed_below)
        slot = second & self.mask
        if self.seconds[slot] != second:
            if self.seconds[slot] >= 0:
                self._evict(slot)
            self.seconds[slot] = second
        return slot * self.nc

    def base_of(self, second: int) -> int:
        """The index of a second's class 0 if it is still open, else -1."""
        slot = second & self.mask
        return slot * self.nc if self.seconds[slot] == second else -1

    def inflight(self, slot: int) -> int:
        base, nc = slot * self.nc, self.nc
        return sum(
            self.sent[i] - self.completed[i] - self.lost[i] - self.abandoned[i]
            for i in range(base, base + nc)
        )

    def _evict(self, slot: int) -> None:
        """A second still open when its slot is wanted: what is in flight is lost."""
        base = slot * self.nc
        for i in range(base, base + self.nc):
            self.lost[i] += self.sent[i] - self.completed[i] - self.lost[i] - self.abandoned[i]
        self.forced.append(self._take(slot))

    def _take(self, slot: int) -> Window:
        nc, base = self.nc, slot * self.nc
        classes = []
        for c in range(nc):
            i = base + c
            cw = ClassWindow(
                due=self.sent[i] + self.skipped[i],
                sent=self.sent[i],
                skipped=self.skipped[i],
                completed=self.completed[i],
                lost=self.lost[i],
                abandoned=self.abandoned[i],
                late=self.late[i],
                wrong=self.wrong[i],
                rcodes={r: n for r in range(16) if (n := self.rcodes[i * 16 + r])},
            )
            classes.append(cw)
            self.sent[i] = self.completed[i] = self.lost[i] = self.late[i] = 0
            self.wrong[i] = self.abandoned[i] = self.skipped[i] = 0
            self.rcodes[i * 16 : i * 16 + 16] = [0] * 16
        for key, n in self.lats[slot].items():
            us, c = divmod(key, nc)
            classes[c].lat_us[us] = n
        self.lats[slot] = {}
        classes[0].refused, self.refused[slot] = self.refused[slot], 0
        window = Window(self.seconds[slot], classes)
        self.seconds[slot] = -1
        return window

    def close(self, cursor_second: int) -> list[Window]:
        """Every second below `cursor_second` (the due second of the next query to
        leave) with nothing in flight, in order, from the oldest not yet closed;
        seconds forced closed since the last call come first. A second in which
        nothing was due is not handed out (Merger fills it in)."""
        out, self.forced = self.forced, []
        second = self.closed_below
        if cursor_second >= CLOSE_ALL:
            cursor_second = max(max(self.seconds) + 1, second)
        while second < cursor_second:
            slot = second & self.mask
            if self.seconds[slot] == second:  # else nothing was due in it (or forced out)
                if self.inflight(slot):
                    break
                out.append(self._take(slot))
            second += 1
        self.closed_below = max(self.closed_below, second)
        return out
