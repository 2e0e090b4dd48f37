"""Connection policies and how connections are split between classes (pure logic)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from soak.load.config import ConnectionPolicy, LoadConfig
from soak.load.conn import Policy, assign_flows
from soak.load.runner import policy_of


def test_shared_flows_carry_every_class() -> None:
    assert assign_flows(3, [1, 1], own=False) == [[0, 1, 2], [0, 1, 2]]


def test_own_flows_split_by_weight_with_at_least_one_each() -> None:
    assert assign_flows(10, [8, 1, 1], own=True) == [list(range(8)), [8], [9]]
    assert assign_flows(2, [1, 1, 1], own=True) == [[0], [1], [2]]


def test_policy_in_nanoseconds() -> None:
    cp = ConnectionPolicy(queries_per_connection=50, idle_s="200ms", reconnect_every_s="2s")
    assert policy_of(cp) == Policy(50, 200_000_000, 2_000_000_000)
    assert policy_of(cp).churns and not policy_of(None).churns


def test_bad_policy_and_protocol_are_refused() -> None:
    with pytest.raises(ValidationError):
        ConnectionPolicy(queries_per_connection=0)
    with pytest.raises(ValidationError):
        ConnectionPolicy(reconnect_every_s=0)
    with pytest.raises(ValidationError):
        LoadConfig(protocol="quic", mix=[{"name": "q", "queries": ["a.test"]}])
    with pytest.raises(ValidationError):
        LoadConfig(doh={"method": "PUT"}, mix=[{"name": "q", "queries": ["a.test"]}])
