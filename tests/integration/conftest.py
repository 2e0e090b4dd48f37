"""Servers several integration modules share: unbound and knot-resolver with TLS
listeners (DoT, DoH) on a throwaway certificate, one of each per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import ServerProc, dnsmasq_upstream, kresd, unbound
from tests.support.tls import make_cert
from tests.support.unbound_counts import unbound_with_control


@pytest.fixture(scope="module")
def tls_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_cert(tmp_path_factory.mktemp("cert"))


@pytest.fixture(scope="module")
def tls_unbound(
    tmp_path_factory: pytest.TempPathFactory, tls_cert: tuple[Path, Path]
) -> Iterator[ServerProc]:
    with unbound(tmp_path_factory.mktemp("unbound"), tls=tls_cert) as s:
        yield s


@pytest.fixture(scope="module")
def tls_kresd(
    tmp_path_factory: pytest.TempPathFactory, tls_cert: tuple[Path, Path]
) -> Iterator[ServerProc]:
    with (
        dnsmasq_upstream(tmp_path_factory.mktemp("upstream")) as up,
        kresd(tmp_path_factory.mktemp("kresd"), up.port, tls=tls_cert) as s,
    ):
        yield s


@pytest.fixture(scope="module")
def counted_unbound(
    tmp_path_factory: pytest.TempPathFactory, tls_cert: tuple[Path, Path]
) -> Iterator[tuple[ServerProc, Path]]:
    """unbound with DoT, DoH and its remote-control socket (its own query counts:
    tests.support.unbound_counts.unbound_queries)."""
    with unbound_with_control(tmp_path_factory.mktemp("counted"), tls_cert) as s:
        yield s
