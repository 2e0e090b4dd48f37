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

from soak.load.stats import Interval
from soak.load.worker import CONTROL_NS, INTERVAL_NS, Control, Pacer, WorkerSpec, monotonic_ns

# take(interval_s, rate_target_qps, backlog, skipped) -> the loop's counts as an Interval,
# its counters reset for the next one.
Take = Callable[[float, float, int, int], Interval]


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
        clock: Callable[[], int] = monotonic_ns,
    ) -> None:
        self.control, self.out, self.clock = control, out, clock
        start = clock()
        self.start_ns = start
        self.timeout_ns = int(spec.timeout_s * 1e9)
        self.hard_end_ns = start + int(spec.max_duration_s * 1e9)
        self.send_end_ns = min(start + int(spec.duration_s * 1e9), self.hard_end_ns)
        self.pacer = Pacer(control.rate_qps(), start)
        self.sending = True
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
        if not self.sending and (outstanding <= 0 or now >= self.send_end_ns + self.timeout_ns):
            return True
        return now >= self.hard_end_ns + self.timeout_ns

    def due(self, now: int) -> int:
        """How many queries should have left by now (none after the end of sending)."""
        end = self.send_end_ns
        return self.pacer.due(now if now < end else end - 1)

    def deadline_ns(self) -> int:
        """The latest a loop may wait before calling done() and tick() again."""
        until = min(self.wake_ns, self.hard_end_ns + self.timeout_ns)
        if not self.sending:
            until = min(until, self.send_end_ns + self.timeout_ns)
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
            self.sending, self.send_end_ns = False, now
        pacer.set_rate(control.rate_qps(), sent_total, now)
        self.skipped += pacer.skip_to(sent_total, now)

    def roll_interval(self, now: int, sent_total: int, take: Take) -> None:
        """The Interval since the last one, with the rate and backlog of the pacer as it
        stands now. After a stall longer than a second, one Interval covers the stall
        and the grid restarts from now."""
        sending, pacer = self.sending, self.pacer
        backlog = max(0, pacer.due(now) - sent_total) if sending else 0
        rate = pacer.rate_qps if sending else 0.0
        self.out.send(take((now - self.last_interval_ns) / 1e9, rate, backlog, self.skipped))
        self.skipped = 0
        self.last_interval_ns = now
        self.next_interval_ns += INTERVAL_NS
        if self.next_interval_ns <= now:
            self.next_interval_ns = now + INTERVAL_NS

    def finish(self, take: Take, drain: Callable[[int, int], object]) -> None:
        """The final Interval. drain(now_ns, silence_end_ns) first counts what is still
        outstanding as lost and ends a silence still going on at silence_end_ns."""
        now = self.clock()
        drain(now, min(now, self.send_end_ns))
        iv = take((now - self.last_interval_ns) / 1e9, 0.0, 0, self.skipped)
        iv.final = True
        self.out.send(iv)
