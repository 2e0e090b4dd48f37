"""prometheus-alertmanager started on loopback for tests (clustering off)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.servers import ServerProc, free_port, spawn, wait_tcp

ALERTMANAGER_CONF = """route:
  receiver: "null"
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: "null"
"""


@contextlib.contextmanager
def alertmanager(tmp: Path) -> Iterator[ServerProc]:
    """prometheus-alertmanager on loopback, clustering off; its v2 API at http://127.0.0.1:port."""
    import httpx

    port = free_port()
    (tmp / "alertmanager.yml").write_text(ALERTMANAGER_CONF)
    (tmp / "am-data").mkdir(exist_ok=True)
    argv = [
        "prometheus-alertmanager",
        f"--config.file={tmp / 'alertmanager.yml'}",
        f"--storage.path={tmp / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    server = spawn("alertmanager", argv, tmp, port)
    try:
        wait_tcp(port, proc=server)
        deadline = time.monotonic() + 20.0
        while httpx.get(f"http://127.0.0.1:{port}/-/ready").status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError(f"alertmanager not ready: {server.log_tail()}")
            time.sleep(0.1)
        yield server
    finally:
        server.stop()


def am_alerts(am_url: str, alertname: str = "SoakLeakGrowing") -> list[dict[str, Any]]:
    """The alerts of one name that the Alertmanager at am_url holds now."""
    import httpx

    r = httpx.get(f"{am_url}/api/v2/alerts", params={"filter": f"alertname={alertname}"})
    r.raise_for_status()
    alerts: list[dict[str, Any]] = r.json()
    return alerts
