"""probes.http_request against a real HTTP server on loopback: what a client made for one
request costs the process that makes it."""

from __future__ import annotations

import ssl
from typing import Any

import pytest

from soak.probes import http_request
from tests.integration.test_refdns import list_server

pytestmark = pytest.mark.integration


def test_requests_without_a_client_load_the_ca_bundle_at_most_once(
    monkeypatch: pytest.MonkeyPatch,
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
    body = b"# HELP up\nup 1\n"
    with list_server(body) as url:
        results = [http_request("GET", url, timeout_s=5.0) for _ in range(10)]
    assert [(r.status, r.body) for r in results] == [(200, body)] * 10
    assert len(loads) <= 1
