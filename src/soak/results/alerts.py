"""Leak alerts: to webhooks (JSON) and Alertmanager's v2 API, resolved when the verdict clears.

An alert fires when a resource's verdict turns `growing` and is resolved when
it is anything else. Alertmanager is told again every `resend_interval_s`
while the alert fires (each send is valid for four intervals, as Prometheus
does); webhooks are told of the transitions only, in the shape of
Alertmanager's webhook payload. A receiver that fails is told again at the
next update until it has heard. Whatever was sent, or failed to be, comes
back as `event` points of kind `alert`: a failure is an event, not an
exception. Successful periodic resends are not events (one a minute would
bury the others).

An alert's labels are the run's tags when it fires (`tags_now`): after a soak's swap,
the `version` running then and its `segment` (0 for the first version, one more for
each swap or rollback), kept until it resolves, so that its resolution and resends
match the alert Alertmanager holds.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from soak.analysis.leaks import LeakVerdict
from soak.analysis.rundata import StoreReader
from soak.clock import ns_to_s, s_to_ns
from soak.config import AlertingConfig
from soak.points import Point, event_point
from soak.results.grew import verdict_culprits
from soak.runs.listening import LeakPass, RunFacts
from soak.runs.swaps import segment_now

ALERT_NAME = "SoakLeakGrowing"
_VALID_FOR_INTERVALS = 4
# A resolution that no receiver takes is given up after this many tries
# (Alertmanager resolves it anyway when its endsAt passes).
_RESOLVE_ATTEMPTS = 5


@dataclass
class _Alert:
    resource: str
    verdict: LeakVerdict
    starts_s: float
    ends_s: float | None = None  # set when resolved
    # receiver URL -> time of its last successful send (0: it has not heard yet)
    last_sent_s: dict[str, float] = field(default_factory=dict)
    attempts: int = 0  # tries to deliver the resolution
    culprit: dict[str, str] = field(default_factory=dict)  # culprit, projection (results.grew)
    tags: dict[str, str] = field(default_factory=dict)  # the run's tags when it fired


def _rfc3339(t_s: float) -> str:
    return (
        datetime.fromtimestamp(t_s, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def _human(value: float, resource: str = "_bytes") -> str:
    """A slope's size the way thresholds are written: 5MiB/h for bytes, 1/h for counts."""
    if resource.endswith("_bytes"):
        for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
            if abs(value) >= size:
                return f"{value / size:.3g}{unit}"
    return f"{value:.3g}"


class Alerter:
    """One run's leak alerts. Call update() with every new set of verdicts."""

    def __init__(
        self,
        cfg: AlertingConfig,
        *,
        run_tags: dict[str, str],
        client: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
        tags_now: Callable[[], dict[str, str]] | None = None,
    ) -> None:
        """`tags_now`: the run's tags at this moment (its version after a swap); by
        default `run_tags` as they are now."""
        self.cfg = cfg
        self.run_tags = dict(run_tags)
        self.tags_now = tags_now or (lambda: dict(self.run_tags))
        self._own_client = client is None
        self.client = client if client is not None else httpx.Client(timeout=cfg.timeout_s)
        self.clock = clock
        self.firing: dict[str, _Alert] = {}
        self.resolving: dict[str, _Alert] = {}
        self._fail_streak: dict[str, int] = {}  # receiver URL -> failed sends in a row

    def resume(self, firing: dict[str, tuple[float, dict[str, str]]]) -> None:
        """A run resumed by a new service: the alerts its previous service had told as
        firing (resource -> when, its tags), firing still, every receiver having heard, so
        that the next pass resends them (with their first startsAt and labels) or resolves
        them, and tells no webhook of a new transition."""
        for resource, (starts_s, tags) in firing.items():
            alert = _Alert(resource, LeakVerdict(resource, "growing", 0.0, 1.0, 0, 0.0), starts_s)
            alert.tags = {**self.run_tags, **tags}
            alert.last_sent_s = dict.fromkeys(self.receivers, starts_s)
            self.firing[resource] = alert

    @property
    def receivers(self) -> list[str]:
        return [*self.cfg.webhooks, *self.cfg.alertmanagers]

    def close(self) -> None:
        if self._own_client:
            self.client.close()

    def update(
        self, verdicts: Sequence[LeakVerdict], culprits: dict[str, dict[str, Any]] | None = None
    ) -> list[Point]:
        """Fire, resend and resolve; the `event` points of what was sent or failed.
        `culprits` (resource -> culprit, projection) become annotations of growing alerts."""
        now_s = self.clock()
        events: list[Point] = []
        if not self.receivers:
            return events
        for v in verdicts:
            alert = self.firing.get(v.resource)
            if v.verdict == "growing":
                if alert is None:
                    alert = _Alert(v.resource, v, now_s, tags=self.tags_now())
                    self.firing[v.resource] = alert
                    self.resolving.pop(v.resource, None)
                alert.verdict = v
                said = (culprits or {}).get(v.resource, {})
                alert.culprit = {k: str(said[k]) for k in ("culprit", "projection") if said.get(k)}
            elif alert is not None:
                alert.verdict, alert.ends_s = v, now_s
                self.resolving[v.resource] = self.firing.pop(v.resource)
        for alert in self.firing.values():
            events += self._deliver(alert, now_s)
        for resource, alert in list(self.resolving.items()):
            events += self._deliver(alert, now_s)
            alert.attempts += 1
            ends_s = alert.ends_s or 0.0
            heard = all(alert.last_sent_s.get(r, 0.0) >= ends_s for r in self.receivers)
            if heard or alert.attempts >= _RESOLVE_ATTEMPTS:
                del self.resolving[resource]
        # One nanosecond apart: events of one kind at one time are one point in a store
        # (two alerts fired in one pass would keep only the last).
        return [dataclasses.replace(p, time_ns=p.time_ns + i) for i, p in enumerate(events)]

    # ---------------------------------------------------------------- sending

    def _deliver(self, alert: _Alert, now_s: float) -> list[Point]:
        """Send to each receiver that is due; events for transitions told and for failures."""
        resolved = alert.ends_s is not None
        due = []
        for url in self.receivers:
            last = alert.last_sent_s.get(url, 0.0)
            if resolved:
                is_due = last < (alert.ends_s or 0.0)
            elif url in self.cfg.alertmanagers:
                # 10% slack: updates come every interval, give or take scheduling jitter.
                is_due = last == 0.0 or now_s - last >= 0.9 * self.cfg.resend_interval_s
            else:
                is_due = last == 0.0
            if is_due:
                due.append(url)
        events = []
        told = []
        for url in due:
            first = alert.last_sent_s.get(url, 0.0) == 0.0 or resolved
            error = self._send(url, alert, now_s)
            events += self._streak_events(url, alert, error, now_s)
            if error is None:
                alert.last_sent_s[url] = now_s
                if first:
                    told.append(url)
        if told:
            summary = self._summary(alert, told)
            events.append(self._event(summary, self._value(alert), now_s, alert))
        return events

    def _send(self, url: str, alert: _Alert, now_s: float) -> str | None:
        """None when the receiver took it, else why not."""
        if url in self.cfg.alertmanagers:
            target = url.rstrip("/") + "/api/v2/alerts"
            body: Any = [self._am_alert(alert, now_s)]
        else:
            target, body = url, self._webhook_body(alert, now_s)
        try:
            response = self.client.post(target, json=body, timeout=self.cfg.timeout_s)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if response.status_code >= 300:
            return f"HTTP {response.status_code}: {response.text[:200].strip()}"
        return None

    # ---------------------------------------------------------------- payloads

    def labels(self, alert: _Alert) -> dict[str, str]:
        tags = alert.tags or self.run_tags
        return {**self.cfg.labels, **tags, "alertname": ALERT_NAME, "resource": alert.resource}

    def annotations(self, alert: _Alert) -> dict[str, str]:
        v = alert.verdict
        soak = (alert.tags or self.run_tags).get("soak", "?")
        summary = (
            f"{v.resource} growing at {_human(v.slope_per_hour, v.resource)}/h "
            f"(threshold {_human(v.threshold_per_hour, v.resource)}/h) in soak {soak}"
            if alert.ends_s is None
            else f"{v.resource} no longer growing ({v.verdict}) in soak {soak}"
        )
        return {
            "summary": summary,
            "verdict": v.verdict,
            "slope_per_hour": f"{v.slope_per_hour:.6g}",
            "threshold_per_hour": f"{v.threshold_per_hour:.6g}",
            "p_value": f"{v.p_value:.3g}",
            "windows": str(v.windows),
            **alert.culprit,
        }

    def _ends_s(self, alert: _Alert, now_s: float) -> float:
        if alert.ends_s is not None:
            return alert.ends_s
        return now_s + _VALID_FOR_INTERVALS * self.cfg.resend_interval_s

    def _am_alert(self, alert: _Alert, now_s: float) -> dict[str, Any]:
        return {
            "labels": self.labels(alert),
            "annotations": self.annotations(alert),
            "startsAt": _rfc3339(alert.starts_s),
            "endsAt": _rfc3339(self._ends_s(alert, now_s)),
        }

    def _webhook_body(self, alert: _Alert, now_s: float) -> dict[str, Any]:
        status = "firing" if alert.ends_s is None else "resolved"
        labels = self.labels(alert)
        return {
            "version": "4",
            "status": status,
            "receiver": "soak",
            "groupLabels": {"alertname": ALERT_NAME},
            "commonLabels": labels,
            "commonAnnotations": self.annotations(alert),
            "alerts": [
                {
                    "status": status,
                    "labels": labels,
                    "annotations": self.annotations(alert),
                    "startsAt": _rfc3339(alert.starts_s),
                    "endsAt": _rfc3339(alert.ends_s) if alert.ends_s is not None else "",
                }
            ],
        }

    # ---------------------------------------------------------------- events

    def _summary(self, alert: _Alert, told: list[str]) -> str:
        state = "firing" if alert.ends_s is None else "resolved"
        summary = self.annotations(alert)["summary"]
        receivers = ", ".join(told)
        return f"{ALERT_NAME} {state}: {summary}; sent to {len(told)} receiver(s): {receivers}"

    def _streak_events(
        self, url: str, alert: _Alert, error: str | None, now_s: float
    ) -> list[Point]:
        """A failure is an event, but a receiver down for a day must not log 1,440 of them:
        the 1st, 2nd, 4th, 8th... failure in a row, then one event when it answers again."""
        streak = self._fail_streak.get(url, 0)
        if error is None:
            self._fail_streak.pop(url, None)
            if streak == 0:
                return []
            msg = f"alert receiver {url} answers again after {streak} failed send(s)"
            return [self._event(msg, 0.0, now_s)]
        streak += 1
        self._fail_streak[url] = streak
        if streak & (streak - 1):
            return []
        what = "resolution" if alert.ends_s is not None else "alert"
        msg = f"{what} {ALERT_NAME} {alert.resource} to {url} failed ({streak} in a row): {error}"
        return [self._event(msg, -1.0, now_s, alert)]

    @staticmethod
    def _value(alert: _Alert) -> float:
        return 1.0 if alert.ends_s is None else 0.0

    def _event(
        self, message: str, value: float, now_s: float, alert: _Alert | None = None
    ) -> Point:
        """An `alert` event, tagged as the alert is labelled (its version and segment)."""
        tags = (alert.tags if alert is not None else None) or self.run_tags
        return event_point("alert", message, s_to_ns(now_s), value).with_tags(tags)


_TOLD = re.compile(rf"^{ALERT_NAME} (firing|resolved): (\S+) ")


def told_firing(store: StoreReader, run_id: str) -> dict[str, tuple[float, dict[str, str]]]:
    """The resources whose last alert the run's events tell as firing, since when and
    with which tags: the `alert` events of Alerter._summary, read back from the run's
    store."""
    firing: dict[str, tuple[float, dict[str, str]]] = {}
    for p in store.points(run_id, "event"):
        told = _TOLD.match(str(p.fields.get("message", "")))
        if told is None or p.tags.get("kind") != "alert":
            continue
        state, resource = told.groups()
        if state == "firing":
            tags = {k: v for k, v in p.tags.items() if k != "kind"}
            firing.setdefault(resource, (ns_to_s(p.time_ns), tags))
        else:
            firing.pop(resource, None)
    return firing


class LeakAlerts:
    """A run's leak alerts as the listener of its leak passes (runs.listening): each pass
    updates its Alerter, with the culprits of what grows where anyone is told."""

    def __init__(self, run: RunFacts) -> None:
        self.run = run
        self.alerter = Alerter(run.scenario.alerting, run_tags=run.run_tags, tags_now=self.tags_now)
        self._resumed = False

    def tags_now(self) -> dict[str, str]:
        """The run's tags now: the run keeps `version` up to date across its swaps (the
        same dict); a soak across an upgrade adds its segment: the count of its swaps and
        rollbacks so far, as the report's segments count them (swaps.json)."""
        if self.run.scenario.upgrade is None:
            return dict(self.run.run_tags)
        return {**self.run.run_tags, "segment": str(segment_now(self.run.run_dir))}

    def heard(self, leak_pass: LeakPass) -> list[Point]:
        if not self._resumed:  # what a previous service of the run told, told once
            self._resumed = True
            if self.alerter.receivers:
                self.alerter.resume(told_firing(leak_pass.store, self.run.run_id))
        culprits = self.alerter.receivers and verdict_culprits(
            leak_pass.store,
            self.run.run_id,
            leak_pass.verdicts,
            run_dir=self.run.run_dir,
            since_ns=leak_pass.since_ns,
            memory_limit_bytes=self.run.scenario.memory_limit_bytes,
        )
        return self.alerter.update(leak_pass.verdicts, culprits or None)

    def close(self) -> None:
        self.alerter.close()
