"""probes.http_request against a real HTTP server on loopback: what a client made for one
request costs the process that makes it."""

from __future__ import annotations

import http.server
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from soak.probes import http_request

pytestmark = pytest.mark.integration


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"# HELP up\nup 1\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/metrics"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_requests_without_a_client_load_the_ca_bundle_at_most_once(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Loading the CA bundle is the costly part of a new client (tens of ms of CPU); the
    # samplers' per-tick requests made one client each, and on a busy machine missed
    # their deadlines on it while the server answered at once.
    loads = []
    real = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        real(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    results = [http_request("GET", server, timeout_s=5.0) for _ in range(10)]
    assert [r.status for r in results] == [200] * 10
    assert all(r.body == b"# HELP up\nup 1\n" for r in results)
    assert len(loads) <= 1
