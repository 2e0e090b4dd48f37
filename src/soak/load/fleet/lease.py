"""The coordinator's bookkeeping of a run's load agents (pure: both clocks injected).

Agents register; once all of them have, the run releases them with one
`start_at` (its origin, at least a margin ahead), so every agent hears it before
it comes and their seconds line up. Each
heartbeat renews an agent's lease and brings its windows; an agent whose lease
runs out (or whose engine says it failed) is lost, and the others go on. The
windows are merged by time: a second (a `stamp`, start_at + k s) is complete when
every agent still active has reported it, or when it is older than the lease
(its missing agents are being lost). `take()` hands out the complete seconds,
summed for the run and per agent. soak.agents.coordinator serves this over
HTTP; soak.load.fleet.run_load drives it for a run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from soak.agents.coordinator import Calls
from soak.agents.protocol import DONE, HEARTBEAT, REGISTER, Reply
from soak.clock import NS_PER_S, ns_to_s, s_to_ns
from soak.load.fleet.merge import AgentTotals, AgentWindow, sum_windows, summed_hists
from soak.load.segments import rate_share_qps

START_MARGIN_S = 1.0  # start_at this far ahead at least: agents ask every 0.2 s, then
# start their workers' interpreters (about 0.1-0.3 s) before it comes


@dataclass
class Slot:
    index: int
    registered: bool = False
    last_seen_s: float = 0.0  # monotonic, of the last call
    done: bool = False
    lost_why: str | None = None
    lost_at_ns: int | None = None
    totals: AgentTotals | None = None
    first_stamp_ns: int | None = None  # the end of the first second it reported
    last_stamp_ns: int | None = None  # the end of the last (its windows come in order)

    @property
    def active(self) -> bool:
        return self.registered and not self.done and self.lost_why is None


@dataclass
class Taken:
    """Complete seconds since the last take: the run's window and each agent's."""

    merged: dict[str, dict[str, float]] = field(default_factory=dict)
    per_agent: dict[int, dict[str, dict[str, float]]] = field(default_factory=dict)
    span_s: float = 0.0
    stamp_ns: int = 0  # the end of the (last) second taken, on the run's grid
    # The latency histograms added (soak.histogram's text form): per class, and per agent.
    hists: dict[str, str] = field(default_factory=dict)
    agent_hists: dict[int, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class LateStart:
    """An agent's first window came `seconds` after the run's first (or, `short`, its
    last `seconds` before the run's end): `due` skipped."""

    agent: int
    seconds: int
    due: float
    short: bool = False


def split_by_share(n: int, shares: dict[str, float]) -> dict[str, int]:
    """`n` queries dealt to classes by their shares (largest remainders): they add up to
    `n`, so the classes' rows add up to `all`."""
    exact = {cls: n * share for cls, share in shares.items()}
    out = {cls: math.floor(v) for cls, v in exact.items()}
    rest = n - sum(out.values())
    for cls in sorted(exact, key=lambda c: out[c] - exact[c])[: max(0, rest)]:
        out[cls] += 1
    return out


@dataclass
class Second:
    """One second of the run's grid as the agents reported it (`stamp_ns` its end), the
    rate asked in it and what the lost agents missing from it were due."""

    stamp_ns: int
    windows: list[AgentWindow]
    asked_qps: float
    missing_due: float


class Fleet:
    """What the coordinator knows of N agents; not thread-safe (the server locks it)."""

    def __init__(
        self,
        count: int,
        class_shares: dict[str, float],
        lease_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_ns: Callable[[], int] = time.time_ns,
        hold_s: float = 0.0,
    ) -> None:
        self.slots = [Slot(i) for i in range(count)]
        self.class_shares = dict(class_shares)  # class -> its share of the asked rate
        self.lease_s = lease_s
        # An agent's window closes up to its queries' timeout after its second: a second
        # waits that long (and a lease) for an agent still active.
        self.hold_s = hold_s
        self.clock, self.wall_ns = clock, wall_ns
        self.rate_qps = 0.0
        self._rates: list[tuple[int, float]] = []  # (from wall ns, asked q/s), in order
        self.start_at_ns: int | None = None
        self.end_ns: int | None = None  # the run's end (wall ns), once released
        self.stopping = False
        self._pending: dict[int, dict[int, AgentWindow]] = {}  # stamp -> agent -> window
        self._emitted_to_ns = 0  # stamps up to this one were handed out
        self._late: list[AgentWindow] = []  # came after their second was handed out
        # The run's seconds are counted from here (its origin; on a resumed run, start_at):
        # an agent's seconds before its first window are due and skipped (`agent_late`).
        self.counted_from_ns: int | None = None
        self.late_starts: list[LateStart] = []  # not yet told (AgentsLoad.check)

    @property
    def count(self) -> int:
        return len(self.slots)

    def set_rate(self, rate_qps: float) -> None:
        self.rate_qps = rate_qps
        self._rates.append((self.wall_ns(), rate_qps))

    def reply(self, index: int) -> Reply:
        slot = self.slots[index]
        stop = self.stopping or slot.lost_why is not None
        duration_s = None
        if self.start_at_ns is not None and self.end_ns is not None:
            duration_s = max(0.0, ns_to_s(self.end_ns - self.start_at_ns))
        share_qps = rate_share_qps(self.rate_qps, self.count)  # equal shares interleave
        return Reply(self.start_at_ns, share_qps, self.lease_s, stop, duration_s)

    def register(self, index: int) -> Reply:
        slot = self._slot(index)
        slot.registered, slot.last_seen_s = True, self.clock()
        return self.reply(index)

    @property
    def all_registered(self) -> bool:
        return all(s.registered for s in self.slots)

    def release(
        self,
        start_at_ns: int,
        end_ns: int | None = None,
        *,
        counted_from_ns: int | None = None,
        keep_length: bool = False,
    ) -> int:
        """The run's start_at: as asked, but never sooner than a margin from now (every
        agent must hear it before it comes: whole seconds later, so that it stays on the
        run's grid), and its end if known; the start_at given. The seconds from
        `counted_from_ns` (the run's origin; default: start_at) are the agents' to count:
        those before an agent's first window are due and skipped (fill_late_start)."""
        earliest_ns = self.wall_ns() + s_to_ns(START_MARGIN_S)
        behind_s = -(-max(0, earliest_ns - start_at_ns) // NS_PER_S)
        self.start_at_ns = start_at_ns + behind_s * NS_PER_S
        if keep_length:  # a load of its own (soak load): its whole length from start_at
            self.counted_from_ns = self.start_at_ns
            self.end_ns = None if end_ns is None else end_ns + behind_s * NS_PER_S
            return self.start_at_ns
        self.counted_from_ns = self.start_at_ns if counted_from_ns is None else counted_from_ns
        self.end_ns = end_ns
        return self.start_at_ns

    def heartbeat(self, index: int, windows: list[AgentWindow]) -> Reply:
        slot = self._slot(index)
        slot.last_seen_s = self.clock()
        for w in windows:
            if w.agent != index:
                raise ValueError(f"agent {index} sent a window of agent {w.agent}")
        if windows and slot.first_stamp_ns is None:
            slot.first_stamp_ns = min(w.stamp_ns for w in windows)
            windows = self.fill_late_start(index, slot.first_stamp_ns) + windows
        if windows:
            slot.last_stamp_ns = max(slot.last_stamp_ns or 0, *(w.stamp_ns for w in windows))
        self._hold(windows)
        return self.reply(index)

    def _hold(self, windows: list[AgentWindow]) -> None:
        for w in windows:
            if w.stamp_ns <= self._emitted_to_ns:
                self._late.append(w)
            else:
                self._pending.setdefault(w.stamp_ns, {})[w.agent] = w

    def fill_late_start(self, index: int, first_stamp_ns: int) -> list[AgentWindow]:
        """The seconds of the run an agent has no window of, before its first (it heard
        start_at late, or the run's start was pushed past its origin): its share of the
        asked rate in each, due and skipped, so that they are not nobody's."""
        if self.counted_from_ns is None:
            return []
        return self._skipped(index, self.counted_from_ns + NS_PER_S, first_stamp_ns, False)

    def _skipped(self, index: int, from_ns: int, below_ns: int, short: bool) -> list[AgentWindow]:
        """Agent `index`'s share of each second stamped from `from_ns` on, below
        `below_ns`, due and skipped; told (late_starts) where there is one."""
        assert self.counted_from_ns is not None
        out = []
        for stamp_ns in range(from_ns, below_ns, NS_PER_S):
            k = (stamp_ns - self.counted_from_ns) // NS_PER_S - 1  # the second's index
            share = rate_share_qps(self.asked_at(stamp_ns), self.count)
            n = math.floor(share * (k + 1)) - math.floor(share * k)
            fields = {
                cls: {"due": float(m), "skipped": float(m)}
                for cls, m in split_by_share(n, self.class_shares).items()
            }
            fields["all"] = {"due": float(n), "skipped": float(n)}
            out.append(AgentWindow(index, stamp_ns, 1.0, fields, {}))
        if out:
            due = sum(w.fields["all"]["due"] for w in out)
            self.late_starts.append(LateStart(index, len(out), due, short))
        return out

    def take_final(self, limit_ns: int) -> list[Second]:
        """Once the coordinator has closed (no agent can report any more): every second
        still held, and the seconds up to `limit_ns` (the run's end, or its stop) that an
        agent not lost never reported (its end cut, its last windows undelivered), its
        share due and skipped: every due second of every agent is counted."""
        if self.counted_from_ns is not None:
            for slot in self.slots:
                if slot.lost_why is None and slot.registered:
                    last_ns = max(slot.last_stamp_ns or 0, self.counted_from_ns)
                    self._hold(self._skipped(slot.index, last_ns + NS_PER_S, limit_ns + 1, True))
        return self.take_seconds(final=True)

    def finish(self, index: int, totals: AgentTotals) -> None:
        slot = self._slot(index)
        slot.done, slot.totals, slot.last_seen_s = True, totals, self.clock()

    def mark_lost(self, index: int, why: str) -> bool:
        """Lost (a failed task, a lease run out); False if it had ended or was lost already."""
        slot = self.slots[index]
        if slot.done or slot.lost_why is not None:
            return False
        slot.lost_why, slot.lost_at_ns = why, self.wall_ns()
        return True

    def expire(self) -> list[Slot]:
        """Agents whose lease ran out since the last call (registered ones only)."""
        now = self.clock()
        out = []
        for slot in self.slots:
            if slot.active and now - slot.last_seen_s > self.lease_s:
                self.mark_lost(slot.index, f"no heartbeat for {self.lease_s:g} s")
                out.append(slot)
        return out

    def take(self) -> Taken:
        """The complete seconds since the last take (and any late windows), summed."""
        seconds = self.take_seconds()
        if not seconds:
            return Taken()
        windows = [w for one in seconds for w in one.windows]
        span_s = float(len(seconds))
        asked_qps = sum(one.asked_qps for one in seconds) / len(seconds)
        lost_due = sum(one.missing_due for one in seconds)
        return self._summed(windows, span_s, asked_qps, lost_due, seconds[-1].stamp_ns)

    def take_merged(self, end_ns: int | None = None) -> list[Taken]:
        """The complete seconds since the last take, each merged by itself (counts and
        histograms added), in order: the run's ledger, one window per grid second."""
        return self.merged(self.take_seconds(), end_ns)

    def merged(self, seconds: list[Second], end_ns: int | None = None) -> list[Taken]:
        """Each second merged by itself; those ending at or after `end_ns` (the run's
        end: the drain of a run stopped early, late windows) merged into one at `end_ns`,
        so that no two are stored at the same time."""
        out, after = [], []
        for one in seconds:
            if end_ns is not None and one.stamp_ns >= end_ns:
                after.append(one)
                continue
            out.append(self._summed(one.windows, 1.0, one.asked_qps, one.missing_due, one.stamp_ns))
        if after and end_ns is not None:
            windows = [w for one in after for w in one.windows]
            asked = sum(one.asked_qps for one in after) / len(after)
            missing = sum(one.missing_due for one in after)
            out.append(self._summed(windows, float(len(after)), asked, missing, end_ns))
        return out

    def take_seconds(self, *, final: bool = False) -> list[Second]:
        """The complete seconds since the last take, as (stamp, the agents' windows of
        it): a second is complete when every active agent has reported it, or once it
        is older than a lease and a timeout (its missing agents are being lost). Windows
        that came after their second was handed out join the next second handed out.
        The run's last second (and any after it) waits for the `final` take, so that
        whatever comes late is stored with it at the run's end, never a second time
        there (a store replaces a point of the same time)."""
        cutoff_ns = self.wall_ns() - s_to_ns(self.lease_s + self.hold_s + 1.0)
        active = set() if final else {s.index for s in self.slots if s.active}
        last_ns = self.end_ns if self.end_ns is not None and not final else None
        out: list[Second] = []
        for stamp in sorted(self._pending):
            got = self._pending[stamp]
            if (not active <= got.keys() and stamp > cutoff_ns) or (last_ns and stamp >= last_ns):
                break  # seconds are handed out in order: wait for this one
            del self._pending[stamp]
            self._emitted_to_ns = stamp
            out.append(self._second(stamp, list(got.values())))
        if self._late and (out or final):
            late, self._late = self._late, []
            if out:
                out[0].windows[:0] = late
            else:  # nothing more to come: they go out as the second after the last
                self._emitted_to_ns += NS_PER_S
                out.append(self._second(self._emitted_to_ns, late))
        while len(self._rates) > 1 and self._rates[1][0] <= self._emitted_to_ns:
            self._rates.pop(0)  # bounded: only the rates the seconds still to come need
        return out

    def _second(self, stamp_ns: int, windows: list[AgentWindow]) -> Second:
        return Second(
            stamp_ns, windows, self.asked_at(stamp_ns), self.missing_due(stamp_ns, windows)
        )

    def missing_due(self, stamp_ns: int, got: list[AgentWindow]) -> float:
        """What the lost agents missing from a second were due in it (their shares of the
        asked rate): due and never sent, as far as the run can tell."""
        present = {w.agent for w in got}
        missing = sum(
            1 for s in self.slots
            if s.index not in present and (s.lost_why is not None or not s.registered)
        )  # fmt: skip
        return self.asked_at(stamp_ns) * missing / len(self.slots) if self.slots else 0.0

    def _summed(
        self, windows: list[AgentWindow], span_s: float, asked_qps: float, lost_due: float,
        stamp_ns: int,
    ) -> Taken:  # fmt: skip
        shares = {"all": asked_qps, **{c: asked_qps * s for c, s in self.class_shares.items()}}
        per_agent, agent_hists = {}, {}
        for index in sorted({w.agent for w in windows}):
            mine = [w for w in windows if w.agent == index]
            per_agent[index] = sum_windows(mine, span_s)
            agent_hists[index] = summed_hists(mine)
        merged = sum_windows(windows, span_s, shares)
        if not merged and lost_due >= 0.5:  # no agent reported it: the lost agents' due
            merged = {"all": {"sent": 0.0, "completed": 0.0, "lost": 0.0, "due": 0.0,
                              "skipped": 0.0, "rate_achieved": 0.0,
                              "rate_target": asked_qps}}  # fmt: skip
        if lost_due >= 0.5:
            for cls, fields in merged.items():
                share = 1.0 if cls == "all" else self.class_shares.get(cls, 0.0)
                if "due" in fields:
                    fields["due"] += round(lost_due * share)
                    fields["skipped"] = fields.get("skipped", 0.0) + round(lost_due * share)
        return Taken(merged, per_agent, span_s, stamp_ns, summed_hists(windows), agent_hists)

    def asked_at(self, time_ns: int) -> float:
        """The asked total rate in force at time_ns (the first one before any change)."""
        rate = self._rates[0][1] if self._rates else self.rate_qps
        for since_ns, r in self._rates:
            if since_ns > time_ns:
                break
            rate = r
        return rate

    def _slot(self, index: int) -> Slot:
        if not 0 <= index < len(self.slots):
            raise KeyError(index)
        return self.slots[index]


def fleet_calls(fleet: Fleet) -> Calls:
    """register, heartbeat and done, on the load agents' Fleet."""

    def call(path: str, body: dict[str, Any]) -> dict[str, Any]:
        index = int(body["agent"])
        if path == REGISTER:
            return fleet.register(index).to_json_dict()
        if path == HEARTBEAT:
            windows = [AgentWindow.from_json_dict(w) for w in body.get("windows", [])]
            return fleet.heartbeat(index, windows).to_json_dict()
        if path == DONE:
            fleet.finish(index, AgentTotals.from_json_dict(body["totals"]))
            return {}
        raise LookupError(path)

    return call
