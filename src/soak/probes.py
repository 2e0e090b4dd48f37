"""One DNS query, one HTTP request, one TCP connect: what was sent and what came back.

Readiness probes, the dig and http samplers and the upgrade checks all go
through here, so that "ok" means the same thing everywhere. None of these
functions raises for a network fault: the fault is the result (`error`), since
a failed probe is evidence to record, not an exception to handle.
"""

from __future__ import annotations

import builtins
import functools
import socket
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import httpx


@dataclass
class DnsResult:
    ok_transport: bool  # a reply came back (any rcode)
    rcode: str | None  # "NOERROR", "NXDOMAIN", ... None without a reply
    answers: list[str] = field(default_factory=list)  # rdata text, RRs of the asked type
    ttls: list[int] = field(default_factory=list)  # one per answer
    flags: list[str] = field(default_factory=list)  # "QR", "AA", "RD", "RA", ...
    latency_ms: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        """A reply with NOERROR (the usual meaning of "the server answered")."""
        return self.ok_transport and self.rcode == "NOERROR"


def _elapsed_ms(start_s: float) -> float:
    return (time.perf_counter() - start_s) * 1000.0


def _answer_rdata(reply: dns.message.Message, rdtype: int) -> tuple[list[str], list[int]]:
    answers: list[str] = []
    ttls: list[int] = []
    for rrset in reply.answer:
        if rrset.rdtype != rdtype:
            continue  # e.g. the CNAME chain in front of the asked type
        for rdata in rrset:
            answers.append(rdata.to_text())
            ttls.append(int(rrset.ttl))
    return answers, ttls


def _udp(query: dns.message.Message, host: str, port: int, timeout_s: float) -> dns.message.Message:
    """A connected socket: a closed port shows as "connection refused" at once (the
    ICMP error), not as a timeout, so a server that is not up yet costs no wait."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        sock.connect((host, port))
        return dns.query.udp(query, host, port=port, timeout=timeout_s, sock=sock)


def _doh(query: dns.message.Message, host: str, port: int, timeout_s: float) -> dns.message.Message:
    """RFC 8484 POST over HTTP/2 through httpx (dnspython 2.9's DoH wants httpx2)."""
    url = f"https://{f'[{host}]' if ':' in host else host}:{port}/dns-query"
    query.id = 0  # RFC 8484: cache friendly; the reply is matched by its stream
    headers = {"content-type": "application/dns-message", "accept": "application/dns-message"}
    with httpx.Client(http2=True, verify=False, timeout=timeout_s) as client:
        try:
            resp = client.post(url, content=query.to_wire(), headers=headers)
        except httpx.TimeoutException:
            raise dns.exception.Timeout from None
        except httpx.HTTPError as exc:
            raise OSError(f"DoH: {exc}") from None
    if resp.status_code != 200:
        raise OSError(f"DoH: HTTP {resp.status_code} {resp.http_version}")
    reply = dns.message.from_wire(resp.content)
    if not query.is_response(reply):
        raise dns.exception.FormError("DoH: the reply does not answer the query")
    return reply


def dns_query(
    host: str,
    port: int,
    name: str,
    rtype: str = "A",
    *,
    protocol: str = "udp",
    timeout_s: float = 2.0,
) -> DnsResult:
    """Ask `host:port` for `name`/`rtype` over udp, tcp, dot or doh; never raises for
    network faults.

    A UDP reply with TC set is retried over TCP, as a resolver would. DoT and DoH
    (POST to /dns-query, HTTP/2 when the server offers h2) do not verify the
    server's certificate: a probe measures the server, it does not authenticate it.
    """
    try:
        rdtype = dns.rdatatype.from_text(rtype)
        query = dns.message.make_query(name, rdtype)
    except (dns.exception.DNSException, ValueError) as exc:
        return DnsResult(False, None, error=f"bad query {name!r}/{rtype}: {exc}")
    start_s = time.perf_counter()
    try:
        if protocol == "tcp":
            reply = dns.query.tcp(query, host, port=port, timeout=timeout_s)
        elif protocol == "udp":
            reply = _udp(query, host, port, timeout_s)
            if reply.flags & dns.flags.TC:
                remaining_s = max(0.05, timeout_s - (time.perf_counter() - start_s))
                reply = dns.query.tcp(query, host, port=port, timeout=remaining_s)
        elif protocol == "dot":
            reply = dns.query.tls(query, host, port=port, timeout=timeout_s, verify=False)
        elif protocol == "doh":
            reply = _doh(query, host, port, timeout_s)
        else:
            return DnsResult(
                False, None, error=f"unknown protocol {protocol!r} (udp, tcp, dot, doh)"
            )
    except dns.exception.Timeout:
        return DnsResult(False, None, latency_ms=_elapsed_ms(start_s), error="timeout")
    except (OSError, EOFError, dns.exception.DNSException) as exc:
        error = f"{type(exc).__name__}: {exc}".rstrip(": ")
        return DnsResult(False, None, latency_ms=_elapsed_ms(start_s), error=error)
    latency_ms = _elapsed_ms(start_s)
    answers, ttls = _answer_rdata(reply, rdtype)
    flags = dns.flags.to_text(reply.flags).split()
    return DnsResult(
        ok_transport=True,
        rcode=dns.rcode.to_text(reply.rcode()),
        answers=answers,
        ttls=ttls,
        flags=flags,
        latency_ms=latency_ms,
    )


@dataclass
class HttpResult:
    status: int | None  # None when no response came back
    latency_ms: float = 0.0
    bytes: int = 0  # body length
    body: builtins.bytes = b""  # `bytes` is the field above
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    def json(self) -> Any:
        import json as _json

        return _json.loads(self.body)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The one TLS context of every client made here, made at the first request.

    A client made for one request would otherwise load the CA bundle again: about 70 ms
    of CPU each (measured on the project's 2-core test machine), which at 1-s ticks and
    a handful of HTTP samplers is a third of a core, and on a busy machine it made the
    samplers miss their deadlines although the server answered in milliseconds.
    """
    return httpx.create_ssl_context()


def http_request(
    method: str,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    json: Any = None,
    timeout_s: float = 10.0,
    client: httpx.Client | None = None,
) -> HttpResult:
    """One request; never raises for network faults (the error is in the result).

    Pass a long-lived `client` to reuse connections (samplers) or to inject a
    transport (tests); without one a client is made for this request only.
    """
    own_client = client is None
    http = client if client is not None else httpx.Client(verify=_ssl_context())
    start_s = time.perf_counter()
    try:
        response = http.request(method, url, headers=headers, json=json, timeout=timeout_s)
        body = response.content
    except httpx.TimeoutException as exc:
        return HttpResult(None, _elapsed_ms(start_s), error=f"timeout: {type(exc).__name__}")
    except (httpx.HTTPError, OSError) as exc:
        error = f"{type(exc).__name__}: {exc}".rstrip(": ")
        return HttpResult(None, _elapsed_ms(start_s), error=error)
    finally:
        if own_client:
            http.close()
    return HttpResult(
        status=response.status_code,
        latency_ms=_elapsed_ms(start_s),
        bytes=len(body),
        body=body,
        headers={k.lower(): v for k, v in response.headers.items()},
    )


def tcp_connect(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True when something accepts a TCP connection on host:port within the timeout."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
