"""Leak alerts into a real prometheus-alertmanager and a real HTTP webhook, on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from soak.analysis.leaks import LeakVerdict, leak_verdict
from soak.config import AlertingConfig
from soak.points import Point
from soak.procfs import read_process
from soak.results.alerts import ALERT_NAME, Alerter
from soak.samplers.proc import to_fields
from tests.support.alertmanager import alertmanager
from tests.support.servers import free_port

pytestmark = pytest.mark.integration

MiB = 1024**2


class Webhook:
    """An HTTP server that keeps every JSON body it is sent; fails the first `fail_first`."""

    def __init__(self, fail_first: int = 0) -> None:
        self.bodies: list[Any] = []
        self.fail_first = fail_first
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if hook.fail_first > 0:
                    hook.fail_first -= 1
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b"not now")
                    return
                hook.bodies.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test reads the bodies, not the log

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def am_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("alertmanager")
    with alertmanager(tmp) as am:
        yield f"http://127.0.0.1:{am.port}"


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


def am_alerts(am_url: str, soak: str) -> list[dict[str, Any]]:
    alerts = httpx.get(f"{am_url}/api/v2/alerts", params={"filter": f'soak="{soak}"'}).json()
    assert isinstance(alerts, list)
    return alerts


def wait_for(check: Any, timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def run_tags(soak: str) -> dict[str, str]:
    return {"soak": soak, "scenario": "leaky", "target": "leaky-proc", "version": "1.0"}


def growing(resource: str = "rss_anon_bytes") -> LeakVerdict:
    return LeakVerdict(resource, "growing", 40 * MiB, 1e-6, 12, 5 * MiB)


def verdict(name: str, resource: str = "rss_anon_bytes") -> LeakVerdict:
    return LeakVerdict(resource, name, 0.1 * MiB, 0.4, 12, 5 * MiB)


def messages(points: list[Point]) -> list[str]:
    assert all(p.measurement == "event" and p.tags["kind"] == "alert" for p in points)
    return [str(p.fields["message"]) for p in points]


def test_alert_fires_is_resent_and_resolves(am_url: str, webhook: Webhook) -> None:
    cfg = AlertingConfig(
        alertmanagers=[am_url],
        webhooks=[webhook.url],
        resend_interval_s=1.0,
        labels={"team": "dns"},
    )
    alerter = Alerter(cfg, run_tags=run_tags("fire-1"))
    try:
        events = alerter.update([growing(), verdict("ok", "fds")])
        (fired,) = messages(events)
        assert "firing" in fired and "rss_anon_bytes" in fired and "2 receiver(s)" in fired
        assert events[0].fields["value"] == 1.0
        assert events[0].tags["soak"] == "fire-1"

        alerts = wait_for(lambda: am_alerts(am_url, "fire-1"))
        (alert,) = alerts
        assert alert["labels"] == {
            "alertname": ALERT_NAME,
            "resource": "rss_anon_bytes",
            "soak": "fire-1",
            "scenario": "leaky",
            "target": "leaky-proc",
            "version": "1.0",
            "team": "dns",
        }
        assert alert["status"]["state"] == "active"
        assert alert["annotations"]["verdict"] == "growing"
        assert "40MiB/h" in alert["annotations"]["summary"]
        (body,) = webhook.bodies
        assert body["status"] == "firing"
        assert body["alerts"][0]["labels"]["resource"] == "rss_anon_bytes"

        # Still growing a resend interval later: Alertmanager hears again (endsAt moves on),
        # the webhook, told of transitions only, does not; a resend is no event.
        ends_before = datetime.fromisoformat(alert["endsAt"])
        time.sleep(1.0)
        assert alerter.update([growing()]) == []
        resent = wait_for(
            lambda: [
                a
                for a in am_alerts(am_url, "fire-1")
                if datetime.fromisoformat(a["endsAt"]) > ends_before
            ]
        )
        assert resent
        assert len(webhook.bodies) == 1

        # The verdict clears: resolved in Alertmanager and at the webhook.
        (resolved,) = messages(alerter.update([verdict("levelling")]))
        assert "resolved" in resolved
        assert wait_for(lambda: not am_alerts(am_url, "fire-1"))
        assert [b["status"] for b in webhook.bodies] == ["firing", "resolved"]
        assert alerter.update([verdict("ok")]) == []  # nothing left to tell
    finally:
        alerter.close()


def test_levelling_and_ok_never_alert(am_url: str, webhook: Webhook) -> None:
    cfg = AlertingConfig(alertmanagers=[am_url], webhooks=[webhook.url], resend_interval_s=1.0)
    alerter = Alerter(cfg, run_tags=run_tags("calm-1"))
    try:
        for name in ("insufficient", "ok", "levelling", "levelling"):
            assert alerter.update([verdict(name)]) == []
        time.sleep(0.5)
        assert am_alerts(am_url, "calm-1") == []
        assert webhook.bodies == []
    finally:
        alerter.close()


def test_a_failing_receiver_is_an_event_and_is_told_later(am_url: str) -> None:
    flaky = Webhook(fail_first=3)
    dead = f"http://127.0.0.1:{free_port()}/nothing-listens"
    cfg = AlertingConfig(alertmanagers=[am_url], webhooks=[flaky.url, dead], timeout_s=2.0)
    alerter = Alerter(cfg, run_tags=run_tags("flaky-1"))
    try:
        first = messages(alerter.update([growing("fds")]))
        assert any("failed (1 in a row): HTTP 500" in m for m in first)
        assert any(dead in m and "failed (1 in a row)" in m for m in first)
        assert any("firing" in m and "1 receiver(s)" in m for m in first)  # Alertmanager took it
        assert wait_for(lambda: am_alerts(am_url, "flaky-1"))

        second = messages(alerter.update([growing("fds")]))
        assert sum("failed (2 in a row)" in m for m in second) == 2
        third = messages(alerter.update([growing("fds")]))
        assert third == []  # the 3rd failure in a row is not an event; the 4th would be
        fourth = messages(alerter.update([growing("fds")]))
        assert any("answers again after 3" in m for m in fourth)
        assert any("firing" in m and flaky.url in m for m in fourth)
        assert [b["status"] for b in flaky.bodies] == ["firing"]
        assert any(dead in m and "failed (4 in a row)" in m for m in fourth)

        resolved = messages(alerter.update([verdict("ok", "fds")]))
        assert any("resolved" in m for m in resolved)
        assert wait_for(lambda: not am_alerts(am_url, "flaky-1"))
    finally:
        alerter.close()
        flaky.close()


def sample_rss_anon(
    pids: list[int], duration_s: float, interval_s: float
) -> dict[int, list[tuple[float, float]]]:
    """RssAnon of each process through the proc sampler's reader, on absolute deadlines."""
    series: dict[int, list[tuple[float, float]]] = {pid: [] for pid in pids}
    start = time.monotonic()
    n = 0
    while n * interval_s <= duration_s:
        time.sleep(max(0.0, start + n * interval_s - time.monotonic()))
        for pid in pids:
            fields = to_fields([read_process(pid)])
            series[pid].append((n * interval_s, float(fields["rss_anon_bytes"])))
        n += 1
    return series


def test_a_process_that_grows_alerts_and_one_that_stops_does_not(am_url: str) -> None:
    leaky = [sys.executable, "-m", "tests.support.leaky", "--kib-per-s", "2048"]
    root = Path(__file__).resolve().parents[2]
    grows = subprocess.Popen([*leaky, "--duration-s", "60"], cwd=root, stdout=subprocess.PIPE)
    stops = subprocess.Popen(
        [*leaky, "--grow-for-s", "8", "--duration-s", "60"], cwd=root, stdout=subprocess.PIPE
    )
    try:
        for proc in (grows, stops):
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        series = sample_rss_anon([grows.pid, stops.pid], duration_s=24.0, interval_s=0.5)
    finally:
        for proc in (grows, stops):
            proc.terminate()
            proc.wait(10)
    verdicts = {}
    for name, pid in (("grows", grows.pid), ("stops", stops.pid)):
        times, values = zip(*series[pid], strict=True)
        verdicts[name] = leak_verdict(
            times,
            values,
            resource="rss_anon_bytes",
            threshold_per_hour=10 * MiB,
            window_s=2.0,
            min_windows=6,
            p_value_max=0.05,
        )
    assert verdicts["grows"].verdict == "growing"
    assert verdicts["grows"].slope_per_hour == pytest.approx(2 * MiB * 3600, rel=0.25)
    assert verdicts["stops"].verdict == "levelling", verdicts["stops"]

    cfg = AlertingConfig(alertmanagers=[am_url])
    for name, v in verdicts.items():
        alerter = Alerter(cfg, run_tags=run_tags(f"real-{name}"))
        try:
            alerter.update([v])
        finally:
            alerter.close()
    alerts = wait_for(lambda: am_alerts(am_url, "real-grows"))
    assert [a["labels"]["resource"] for a in alerts] == ["rss_anon_bytes"]
    assert am_alerts(am_url, "real-stops") == []


def test_the_culprit_and_projection_are_annotations(am_url: str, webhook: Webhook) -> None:
    cfg = AlertingConfig(alertmanagers=[am_url], webhooks=[webhook.url], resend_interval_s=1.0)
    alerter = Alerter(cfg, run_tags=run_tags("culprit-1"))
    said = {"culprit": "mapping heap [heap+anon]: +40.0 MiB RSS", "projection": "limit in 3.0 h"}
    try:
        alerter.update([growing()], {"rss_anon_bytes": said, "fds": {"culprit": "x"}})
        (alert,) = wait_for(lambda: am_alerts(am_url, "culprit-1"))
        assert alert["annotations"]["culprit"] == said["culprit"]
        assert alert["annotations"]["projection"] == "limit in 3.0 h"
        (body,) = webhook.bodies
        assert body["alerts"][0]["annotations"]["culprit"] == said["culprit"]
    finally:
        alerter.close()


def test_a_resumed_run_resends_its_firing_alert_and_tells_no_new_transition(
    am_url: str, webhook: Webhook, tmp_path: Path
) -> None:
    """A service restart: the new service's alerter of the run reads what the previous one
    told (its `alert` events in the run's store) and goes on with the same alert: the
    webhook hears no second `firing`, Alertmanager keeps its startsAt; the resolution
    that follows is told once."""
    from soak.results.alerts import told_firing
    from soak.sinks.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "points.db")
    cfg = AlertingConfig(alertmanagers=[am_url], webhooks=[webhook.url], resend_interval_s=1.0)
    before = Alerter(cfg, run_tags=run_tags("resumed-1"))
    try:
        store.write(before.update([growing(), growing("fds")]))
        store.write(before.update([growing(), verdict("ok", "fds")]))  # fds resolved
    finally:
        before.close()
    (first,) = wait_for(lambda: am_alerts(am_url, "resumed-1"))
    told = ["firing", "firing", "resolved"]  # rss_anon_bytes and fds fired, fds resolved
    assert [b["status"] for b in webhook.bodies] == told
    assert set(told_firing(store, "resumed-1")) == {"rss_anon_bytes"}

    after = Alerter(cfg, run_tags=run_tags("resumed-1"))
    try:
        after.resume(told_firing(store, "resumed-1"))
        time.sleep(1.0)  # a resend interval: Alertmanager is due again
        assert after.update([growing(), verdict("ok", "fds")]) == []  # no new transition
        assert [b["status"] for b in webhook.bodies] == told
        (again,) = am_alerts(am_url, "resumed-1")
        assert again["startsAt"] == first["startsAt"]
        (resolved,) = messages(after.update([verdict("levelling")]))
        assert "resolved" in resolved and "rss_anon_bytes" in resolved
        assert [b["status"] for b in webhook.bodies] == [*told, "resolved"]
        assert wait_for(lambda: not am_alerts(am_url, "resumed-1"))
    finally:
        after.close()
        store.close()


def test_an_alert_keeps_the_version_it_fired_in_and_one_after_a_swap_names_the_new(
    am_url: str, tmp_path: Path
) -> None:
    """A soak's swap between two passes: the alert fired before it keeps its labels
    (version format-1, segment 0) through its resends, a resumed service and its
    resolution; one fired after it names format-2, segment 1."""
    from soak.results.alerts import told_firing
    from soak.sinks.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "points.db")
    cfg = AlertingConfig(alertmanagers=[am_url], resend_interval_s=1.0)
    now = {**run_tags("swapped-1"), "version": "format-1", "segment": "0"}
    before = Alerter(cfg, run_tags=run_tags("swapped-1"), tags_now=lambda: dict(now))
    try:
        store.write(before.update([growing("fds")]))
        now |= {"version": "format-2", "segment": "1"}  # the swap
        store.write(before.update([growing("fds"), growing()]))
    finally:
        before.close()

    def versions() -> dict[str, tuple[str, str]]:
        return {
            a["labels"]["resource"]: (a["labels"]["version"], a["labels"]["segment"])
            for a in am_alerts(am_url, "swapped-1")
        }

    both = {"fds": ("format-1", "0"), "rss_anon_bytes": ("format-2", "1")}
    assert wait_for(lambda: versions() == both), versions()
    told = told_firing(store, "swapped-1")
    assert {r: (t["version"], t["segment"]) for r, (_, t) in told.items()} == both
    after = Alerter(cfg, run_tags=run_tags("swapped-1"), tags_now=lambda: dict(now))
    try:
        after.resume(told)
        (resolved,) = after.update([verdict("ok", "fds"), growing()])
        assert resolved.tags["version"] == "format-1" and "resolved" in messages([resolved])[0]
        assert wait_for(lambda: versions() == {"rss_anon_bytes": ("format-2", "1")}), versions()
    finally:
        after.close()
        store.close()
