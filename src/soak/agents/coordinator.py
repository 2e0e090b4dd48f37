"""The run's coordinator: soak.agents.protocol's calls served over HTTP.

A small threaded HTTP server in the process that runs the soak (the service, or
`soak start --foreground`), bound to `listen_host:listen_port` (loopback by default;
agents on host networking on this machine reach it there). It checks the run's
token and hands each call to its bookkeeping (the load agents' Fleet through
soak.load.fleet.lease.fleet_calls; the sampler agent's inbox), one call at a time
under one lock; verdicts stay with the run.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from soak.agents.engine import AgentEngine, wait_for_agents
from soak.agents.engine_config import EngineAgentConfig
from soak.agents.spec import AgentSpec

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 8 * 1024 * 1024  # a heartbeat carries a few seconds of windows


Calls = Callable[[str, dict[str, Any]], dict[str, Any]]  # (path, body) -> the answer


class Coordinator:
    def __init__(self, calls: Calls, token: str, listen: tuple[str, int]) -> None:
        self.calls = calls
        self.lock = threading.Lock()
        self._token = token
        self._server = ThreadingHTTPServer(listen, _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="agents-coordinator", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5.0)

    def authorised(self, header: str | None) -> bool:
        given = (header or "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), self._token.encode())

    def handle(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One call; LookupError for an unknown agent or call, ValueError for a bad body."""
        if "agent" not in body:
            raise ValueError("the body names no agent")
        with self.lock:
            return self.calls(path, body)


def _handler(coordinator: Coordinator) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if not coordinator.authorised(self.headers.get("Authorization")):
                self._send(401, {"error": "wrong or missing token"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self._send(413, {"error": f"body over {MAX_BODY_BYTES} bytes"})
                return
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                self._send(200, coordinator.handle(self.path, body))
            except LookupError:
                self._send(404, {"error": f"no such agent or call: {self.path}"})
            except (ValueError, TypeError) as exc:
                self._send(400, {"error": str(exc)})

        def _send(self, status: int, data: dict[str, Any]) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("agents coordinator: " + format, *args)

    return Handler


class AgentsOnEngine:
    """An engine's agents and the coordinator they call, opened together and closed
    together: load agents (soak.load.fleet.run_load) and the sampler agent
    (soak.samplers.remote_samplers) alike."""

    def __init__(self, engine: AgentEngine) -> None:
        self.engine = engine
        self.coordinator: Coordinator | None = None

    def open(
        self,
        calls: Calls,
        agents: EngineAgentConfig,
        run_id: str,
        role: str,
        spec: Callable[[str, str], AgentSpec],
        missing: Callable[[], list[str]],
        *,
        what: str,
        clock: Callable[[], float],
    ) -> Coordinator:
        """The coordinator open (a token made for the run), what an earlier coordinator of
        the run left on the engine (its agents of `role`) removed, the agents of
        `spec(url, token)` started and
        waited for until `missing()` (called under the coordinator's lock) names none;
        raises with nothing left running."""
        token = secrets.token_urlsafe(24)
        coordinator = Coordinator(calls, token, (agents.listen_host, agents.listen_port))
        self.coordinator = coordinator
        coordinator.start()
        url = f"http://{agents.advertise or agents.listen_host}:{coordinator.address[1]}"

        def waiting() -> list[str]:
            with coordinator.lock:
                return missing()

        try:
            self.engine.sweep(run_id, role)
            self.engine.start(spec(url, token))
            wait_for_agents(self.engine, waiting, agents.start_timeout_s, what, clock)
        except BaseException:
            self.close()
            raise
        return coordinator

    def close(self) -> None:
        """The engine's objects removed, the coordinator closed; once (a second call, or
        one after a failed open, finds nothing to do)."""
        coordinator, self.coordinator = self.coordinator, None
        try:
            self.engine.remove()
        finally:
            if coordinator is not None:
                coordinator.close()
