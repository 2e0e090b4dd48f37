"""probes: results for faults that need no socket (bad input, injected HTTP transport)."""

from __future__ import annotations

import httpx

from soak.probes import DnsResult, HttpResult, dns_query, http_request


def test_dns_bad_type_is_a_result_not_an_exception() -> None:
    result = dns_query("127.0.0.1", 53, "www.example.test.", "NOSUCHTYPE")
    assert isinstance(result, DnsResult)
    assert not result.ok_transport and result.rcode is None
    assert result.error is not None and "NOSUCHTYPE" in result.error


def test_dns_unknown_protocol() -> None:
    result = dns_query("127.0.0.1", 53, "x.test.", protocol="quic")
    assert not result.ok and result.error is not None and "quic" in result.error


def test_http_result_from_injected_transport() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["x-api-key"] == "k"
        assert request.read() == b'{"a":1}'
        return httpx.Response(201, content=b"made", headers={"X-Thing": "1"})

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        result = http_request(
            "POST", "http://127.0.0.1:1/z", headers={"X-API-Key": "k"}, json={"a": 1}, client=client
        )
    assert result == HttpResult(
        status=201,
        latency_ms=result.latency_ms,
        bytes=4,
        body=b"made",
        headers={"x-thing": "1", "content-length": "4"},
    )
    assert result.ok and result.error is None


def test_http_transport_fault_is_a_result() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        result = http_request("GET", "http://127.0.0.1:1/", client=client)
    assert result.status is None and not result.ok
    assert result.error is not None and "ConnectError" in result.error
