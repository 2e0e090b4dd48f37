"""Asking a corpus of names (thousands, in parallel, at a bounded rate) of one version.

The old version's answers are a snapshot item (`kind: corpus`); a `corpus`
check asks the same names of the new version and compares (corpus_diff.py).
Each answer is kept as a small record: rcode, header flags, and the answer
section as (`owner TYPE rdata`, TTL) pairs, sorted. Memory is N records.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

Record = dict[str, Any]


def record_of(reply: dns.message.Message) -> Record:
    answers = sorted(
        [f"{rrset.name.to_text()} {dns.rdatatype.to_text(rrset.rdtype)} {rd.to_text()}", rrset.ttl]
        for rrset in reply.answer
        for rd in rrset
    )
    return {
        "rcode": dns.rcode.to_text(reply.rcode()),
        "flags": sorted(dns.flags.to_text(reply.flags).split()),
        "answers": answers,
    }


def ask_one(host: str, port: int, name: str, rtype: str, protocol: str, timeout_s: float) -> Record:
    """One query; a fault is a record with `error`, never an exception."""
    try:
        query = dns.message.make_query(name, rtype)
    except (dns.exception.DNSException, ValueError) as exc:
        return {"error": f"bad query: {exc}"}
    try:
        if protocol == "tcp":
            reply = dns.query.tcp(query, host, port=port, timeout=timeout_s)
        else:
            reply = dns.query.udp(query, host, port=port, timeout=timeout_s)
            if reply.flags & dns.flags.TC:  # as a resolver would
                reply = dns.query.tcp(query, host, port=port, timeout=timeout_s)
    except dns.exception.Timeout:
        return {"error": "timeout"}
    except (OSError, dns.exception.DNSException) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    return record_of(reply)


def ask_corpus(
    pairs: list[tuple[str, str]],
    host: str,
    port: int,
    *,
    protocol: str,
    rate_qps: float,
    parallel: int,
    timeout_s: float,
    ask: Callable[[str, int, str, str, str, float], Record] = ask_one,
) -> list[Record]:
    """Every (name, type) asked once, at most `rate_qps` started per second (absolute
    deadlines on the monotonic clock) and at most `parallel` in flight; records in the
    order of `pairs`, each with its question as `q`."""
    records: list[Record] = [{} for _ in pairs]
    in_flight = threading.BoundedSemaphore(parallel)

    def work(i: int, name: str, rtype: str) -> None:
        try:
            records[i] = {
                "q": f"{name} {rtype}",
                **ask(host, port, name, rtype, protocol, timeout_s),
            }
        finally:
            in_flight.release()

    start_s = time.monotonic()
    futures: list[Future[None]] = []
    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="corpus") as pool:
        for i, (name, rtype) in enumerate(pairs):
            delay_s = start_s + i / rate_qps - time.monotonic()
            if delay_s > 0:
                time.sleep(delay_s)
            in_flight.acquire()
            futures.append(pool.submit(work, i, name, rtype))
    for future in futures:
        future.result()  # a bug in work() surfaces here, not as a silent empty record
    return records
