"""observe/connections.py: which connections the health server keeps (pure)."""

from __future__ import annotations

import pytest

from probemarker.observe.connections import (
    ConnectionGate,
    Eviction,
    ServerStats,
    eviction,
    peer_of,
)
from probemarker.observe.descriptors import ConnectionLimits

LIMITS = ConnectionLimits(total=4, per_peer=2)

# (open in all, open from this peer) -> why an older one must make room
EVICTIONS = [
    pytest.param(0, 0, None, id="empty"),
    pytest.param(3, 1, None, id="last-place"),
    pytest.param(4, 0, Eviction.LIMIT, id="full"),
    pytest.param(2, 2, Eviction.PEER_LIMIT, id="peer-full"),
    pytest.param(4, 2, Eviction.PEER_LIMIT, id="both-full-the-peer-pays"),
]


@pytest.mark.parametrize(("total", "peer", "expected"), EVICTIONS)
def test_eviction(total: int, peer: int, expected: Eviction | None) -> None:
    assert eviction(open_total=total, open_from_peer=peer, limits=LIMITS) is expected


PEERS = [
    pytest.param(("10.0.0.7", 50000), "10.0.0.7", id="ipv4"),
    pytest.param(("::ffff:10.0.0.7", 50000, 0, 0), "10.0.0.7", id="ipv4-mapped-is-ipv4"),
    pytest.param(("fd00::7", 50000, 0, 0), "fd00::7", id="ipv6"),
    pytest.param(("FD00:0::7", 50000, 0, 0), "fd00::7", id="ipv6-normalised"),
    pytest.param(("fe80::1%eth0", 50000, 0, 2), "fe80::1", id="scoped"),
    pytest.param("/run/x.sock", "/run/x.sock", id="not-ip"),
]


@pytest.mark.parametrize(("address", "expected"), PEERS)
def test_peer_of(address: object, expected: str) -> None:
    assert peer_of(address) == expected


def test_the_newest_gets_in_and_the_oldest_makes_room() -> None:
    stats = ServerStats()
    gate = ConnectionGate(LIMITS, stats)
    assert stats.limit == 4
    # one address: its own oldest makes room past 2
    assert [gate.admit("a1", "a"), gate.admit("a2", "a"), gate.admit("a3", "a")] == [
        None,
        None,
        "a1",
    ]
    # the server full: the oldest of all, whoever's
    assert [gate.admit("b1", "b"), gate.admit("b2", "b")] == [None, None]
    assert gate.admit("k1", "kubelet") == "a2"
    # an address at its share while the server is full: its own oldest, not another's
    assert gate.admit("b3", "b") == "b1"
    assert stats.evicted == {Eviction.PEER_LIMIT: 2, Eviction.LIMIT: 1}
    assert (stats.open, stats.accepted) == (4, 7)
    assert repr(gate) == "ConnectionGate(ConnectionLimits(total=4, per_peer=2), open=4)"


def test_a_release_gives_the_place_back_once() -> None:
    stats = ServerStats()
    gate = ConnectionGate(LIMITS, stats)
    gate.admit("a1", "a")
    gate.admit("a2", "a")
    assert gate.admit("a3", "a") == "a1"
    gate.release("a1")  # the evicted one's end, later: already forgotten
    assert stats.open == 2
    gate.release("a2")
    gate.release("a2")
    gate.release("never-admitted")
    assert stats.open == 1
    assert gate.admit("a4", "a") is None  # a's place back
    gate.release("a3")
    gate.release("a4")
    assert stats.open == 0
