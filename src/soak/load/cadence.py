"""The once-a-second bookkeeping of a load loop, the same for every loop.

udp.py, tcp.py and udp_fast.py send and read in their own ways; what they do a
few times a second is this: decide when sending is over (every query due before
the end has left, or the parent said stop) and when the loop ends (nothing
outstanding, or the timeout after the end has passed), poll the control pipe
(rate share, stop) every CONTROL_NS, cut an Interval on the absolute one-second
grid and send it to the parent, and send the final Interval. Time comes in as
`now` from the loop (which reads the monotonic clock anyway) and from an
injected clock at the start and the end, so tests drive it without sleeping.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from soak.clock import NS_PER_S, s_to_ns, second_end_ns, second_of
from soak.load.ledger import CLOSE_ALL
from soak.load.stats import Interval
from soak.load.worker import CONTROL_NS, INTERVAL_NS, Control, Pacer, WorkerSpec, monotonic_ns

# take(interval_s, rate_target_qps, backlog, skipped, cursor_second) -> the loop's counts as
# an Interval with its windows closed before cursor_second, its counters reset.
Take = Callable[[float, float, int, int, int], Interval]
# skip(second, n): n queries due in that grid second never leave (the schedule moves on).
Skip = Callable[[int, int], None]


class Sender(Protocol):
    def send(self, obj: object) -> None: ...


class Cadence:
    """When a load loop stops sending and ends, when it polls its control pipe, and the
    Interval it reports every second and at the end."""

    def __init__(
        self,
        spec: WorkerSpec,
        control: Control,
        out: Sender,
        skip: Skip,
        clock: Callable[[], int] = monotonic_ns,
    ) -> None:
        self.control, self.out, self.skip, self.clock = control, out, skip, clock
        start = clock()
        self.start_ns = start
        # The run's grid: second 0 begins at the origin (the run's, when it gave one).
        # This worker's queries interleave with the others' (spec.phase), so that
        # together they are due exactly rate x seconds.
        origin = spec.begin_at_ns if 0 < spec.begin_at_ns <= start else start
        self.origin_ns = origin
        self.timeout_ns = s_to_ns(spec.timeout_s)
        self.hard_end_ns = origin + s_to_ns(spec.max_duration_s)
        self.send_end_ns = min(origin + s_to_ns(spec.duration_s), self.hard_end_ns)
        self.pacer = Pacer(control.rate_qps(), origin, spec.phase)
        self.sending = True
        self.sent_end_ns = -1  # when sending ended (-1: not yet)
        self.skipped = 0  # queries dropped from the schedule in this interval
        self.next_control_ns = start + CONTROL_NS
        self.next_interval_ns = start + INTERVAL_NS
        self.last_interval_ns = start
        self.wake_ns = min(self.next_control_ns, self.next_interval_ns)  # tick() has work

    def done(self, now: int, sent_total: int, outstanding: int) -> bool:
        """Whether the loop ends now; sending stops once every query due before the end
        has left (`sending` says so)."""
        if self.sending and now >= self.send_end_ns:
            self.sending = sent_total < self.pacer.due(self.send_end_ns - 1)
        if not self.sending and self.sent_end_ns < 0:
            self.sent_end_ns = now  # the last query left by now: its answer is due by + timeout
        if not self.sending and (outstanding <= 0 or now >= self.sent_end_ns + self.timeout_ns):
            return True
        return now >= self.hard_end_ns + self.timeout_ns

    def due(self, now: int) -> int:
        """How many queries should have left by now (none after the end of sending)."""
        end = self.send_end_ns
        return self.pacer.due(now if now < end else end - 1)

    def second_of_query(self, k: int, now: int) -> int:
        """The grid second query k of the schedule is due in (flat out: now's)."""
        pacer = self.pacer
        if pacer.rate_qps > 0 and k >= pacer.base_k:
            return second_of(pacer.deadline_ns(k), self.origin_ns)
        return second_of(now, self.origin_ns)

    def boundary_k(self, second: int) -> int:
        """The first query of the schedule due after `second` (flat out: none is)."""
        if self.pacer.rate_qps <= 0:
            return CLOSE_ALL
        return self.pacer.due(second_end_ns(self.origin_ns, second) - 1)

    def cursor_second(self, sent_total: int, now: int) -> int:
        """Every grid second below this one has had all its queries sent or skipped."""
        if not self.sending:
            return CLOSE_ALL
        return self.second_of_query(sent_total, now)

    def skip_range(self, k: int, end_k: int) -> None:
        """Queries k..end_k-1 of the schedule never leave: each counts as skipped in the
        second it was due."""
        while k < end_k:
            second = self.second_of_query(k, self.origin_ns)
            upto = min(end_k, max(k + 1, self.boundary_k(second)))
            self.skip(second, upto - k)
            k = upto

    def end_sending(self, sent_total: int) -> None:
        """No more queries leave: those due before the end of sending that have not
        left count as skipped (before any window closes past them)."""
        if self.pacer.rate_qps > 0:
            self.skip_range(sent_total, self.pacer.due(self.send_end_ns - 1))
        self.sending = False

    def deadline_ns(self) -> int:
        """The latest a loop may wait before calling done() and tick() again."""
        until = min(self.wake_ns, self.hard_end_ns + self.timeout_ns)
        if not self.sending:
            until = min(until, max(self.sent_end_ns, self.send_end_ns) + self.timeout_ns)
        return until

    def tick(self, now: int, sent_total: int, take: Take) -> bool:
        """The control poll when it is due, then the Interval when one is due (sent to the
        parent). True when an Interval went out (the loop's counters were reset)."""
        if now >= self.next_control_ns:
            self.poll_control(now, sent_total)
        rolled = now >= self.next_interval_ns
        if rolled:
            self.roll_interval(now, sent_total, take)
        self.wake_ns = min(self.next_control_ns, self.next_interval_ns)
        return rolled

    def poll_control(self, now: int, sent_total: int) -> None:
        control, pacer = self.control, self.pacer
        self.next_control_ns = now + CONTROL_NS
        control.poll()
        if control.stopped() and self.sending:
            # what was due before the stop (and within the schedule) is due, the rest not
            self.send_end_ns = min(self.send_end_ns, now)
            self.end_sending(sent_total)
        at_ns = control.rate_at_ns
        if at_ns is not None and pacer.rate_qps > 0 and now - at_ns < INTERVAL_NS:
            pacer.set_rate_at(control.rate_qps(), at_ns)
        else:
            pacer.set_rate(control.rate_qps(), sent_total, now)
        behind = pacer.behind(sent_total, min(now, self.send_end_ns - 1)) if self.sending else 0
        if behind:
            self.skip_range(sent_total, sent_total + behind)
            pacer.skip(behind)
            self.skipped += behind

    def roll_interval(self, now: int, sent_total: int, take: Take) -> None:
        """The Interval since the last one, with the rate and backlog of the pacer as it
        stands now. After a stall longer than a second, one Interval covers the stall
        and the grid restarts from now."""
        sending, pacer = self.sending, self.pacer
        backlog = max(0, pacer.due(now) - sent_total) if sending else 0
        rate = pacer.rate_qps if sending else 0.0
        cursor = self.cursor_second(sent_total, now)
        self.out.send(
            take((now - self.last_interval_ns) / NS_PER_S, rate, backlog, self.skipped, cursor)
        )
        self.skipped = 0
        self.last_interval_ns = now
        self.next_interval_ns += INTERVAL_NS
        if self.next_interval_ns <= now:
            self.next_interval_ns = now + INTERVAL_NS

    def finish(self, take: Take, drain: Callable[[int, int], object], sent_total: int) -> None:
        """The final Interval with every window closed. The queries due before the end
        (or the stop) that never left count as skipped; drain(now_ns, silence_end_ns)
        counts what is still outstanding as lost and ends a silence still going on."""
        now = self.clock()
        if self.sending:  # the hard end came before every due query had left
            self.end_sending(sent_total)
        drain(now, min(now, self.send_end_ns))
        iv = take((now - self.last_interval_ns) / NS_PER_S, 0.0, 0, self.skipped, CLOSE_ALL)
        iv.final = True
        self.out.send(iv)
