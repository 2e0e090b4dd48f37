"""Real time-series servers on loopback with temp dirs, for tests and benchmarks.

    with influxdb_v1(tmp) as influx:      # InfluxDB 1.6: influx.url, influx.query(...)
        influx.create_database("soak")
    with victoria_metrics(tmp) as vm:     # VictoriaMetrics: /write, /api/v2/write, vm.export(...)
        ...

Both are ServerProc-like handles that can be stopped and started again on the
same port and data directory (`restart()`, `stop()`, `start()`), which is what
an outage test needs.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.servers import ServerProc, free_port, spawn, wait_tcp


def _wait_http(url: str, server: ServerProc, ok: tuple[int, ...], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited: {server.log_tail()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1.0).status_code in ok:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{server.name} not ready at {url} after {timeout_s}s: {server.log_tail()}")


@dataclass
class Tsdb:
    """A started time-series server that can be stopped and started again (same port, same data)."""

    name: str
    argv: list[str]
    workdir: Path
    port: int
    ready_path: str
    proc: ServerProc | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = spawn(self.name, self.argv, self.workdir, self.port)
        wait_tcp(self.port, timeout_s=30, proc=self.proc)
        _wait_http(self.url + self.ready_path, self.proc, (200, 204))

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer: no shutdown, no flush."""
        if self.proc is not None:
            self.proc.proc.kill()
            self.proc.proc.wait(10)
            self.proc = None


# ---------------------------------------------------------------- InfluxDB 1.x


class InfluxV1(Tsdb):
    def query(self, q: str, db: str | None = None) -> list[dict[str, Any]]:
        """InfluxQL; the `series` of the first statement's result (timestamps in ns)."""
        params = {"q": q, "epoch": "ns"}
        if db:
            params["db"] = db
        r = httpx.post(self.url + "/query", params=params, timeout=30)
        r.raise_for_status()
        result = r.json()["results"][0]
        if "error" in result:
            raise RuntimeError(f"InfluxQL {q!r}: {result['error']}")
        return list(result.get("series", []))

    def create_database(self, db: str) -> None:
        self.query(f'CREATE DATABASE "{db}"')


def influx_v1_config(workdir: Path, http_port: int, rpc_port: int) -> str:
    return f"""reporting-disabled = true
bind-address = "127.0.0.1:{rpc_port}"
[meta]
  dir = "{workdir / "meta"}"
[data]
  dir = "{workdir / "data"}"
  wal-dir = "{workdir / "wal"}"
  query-log-enabled = false
[http]
  enabled = true
  bind-address = "127.0.0.1:{http_port}"
  log-enabled = false
[monitor]
  store-enabled = false
[continuous_queries]
  enabled = false
[subscriber]
  enabled = false
"""


@contextlib.contextmanager
def influxdb_v1(tmp: Path, data_settings: str = "") -> Iterator[InfluxV1]:
    """InfluxDB 1.6 (`influxd run -config`), HTTP on 127.0.0.1, data in `tmp`;
    `data_settings` (TOML lines) added to its [data] section."""
    workdir = tmp / "influxdb"
    workdir.mkdir(parents=True, exist_ok=True)
    port, rpc_port = free_port(), free_port()
    conf = workdir / "influxdb.conf"
    text = influx_v1_config(workdir, port, rpc_port)
    conf.write_text(text.replace("[data]\n", f"[data]\n{data_settings}") if data_settings else text)
    server = InfluxV1("influxd", ["influxd", "run", "-config", str(conf)], workdir, port, "/ping")
    server.start()
    try:
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------- VictoriaMetrics


class VictoriaMetrics(Tsdb):
    def force_flush(self) -> None:
        """Makes just-written samples visible to queries (they are buffered for ~1 s)."""
        httpx.get(self.url + "/internal/force_flush", timeout=30).raise_for_status()

    def export(self, match: str, series: int = 0, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """/api/v1/export: one JSON object per series (metric labels, values, timestamps in ms).

        With `series`, asks again until that many series are found or `timeout_s` passes:
        a series seen for the first time is searchable a moment after its samples are.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            self.force_flush()
            r = httpx.post(self.url + "/api/v1/export", data={"match[]": match}, timeout=60)
            r.raise_for_status()
            found = [json.loads(line) for line in r.text.splitlines() if line.strip()]
            if len(found) >= series or time.monotonic() > deadline:
                return found
            time.sleep(0.2)


@contextlib.contextmanager
def victoria_metrics(tmp: Path) -> Iterator[VictoriaMetrics]:
    """victoria-metrics single node on 127.0.0.1 with its storage in `tmp`."""
    workdir = tmp / "victoria-metrics"
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [
        "victoria-metrics",
        f"-httpListenAddr=127.0.0.1:{port}",
        f"-storageDataPath={workdir / 'data'}",
        "-retentionPeriod=100y",  # tests may write points with old timestamps
        "-loggerLevel=WARN",
    ]
    server = VictoriaMetrics("victoria-metrics", argv, workdir, port, "/health")
    server.start()
    try:
        yield server
    finally:
        server.stop()
