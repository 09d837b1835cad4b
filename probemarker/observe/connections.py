"""Which connections the health and metrics server keeps, and what it counts.

Stage: observation (pure state, no I/O). Input: each accepted connection (an opaque
handle) with its peer address, and its end. Output: which older connection, if any,
makes room for it (`ConnectionGate.admit`), and the counters /metrics shows
(`ServerStats`).

The newest connection always gets in. When its address already holds `per_peer`
connections, that address' oldest is closed for it; otherwise, when the server holds
`total`, the oldest of all is. Why the newest: the kubelet's probe and Prometheus'
scrape send their request the moment they connect and are answered within
milliseconds, while a flood's connections sit idle or read slowly. Refusing new
connections instead would let a flood from more addresses than the per-peer share
allows keep the kubelet out for as long as it lasts, and the kubelet would restart a
healthy daemon; closing the oldest keeps the kubelet's probe in unless the flood
connects `total` times within the few milliseconds the probe takes.

Invariants: the gate never counts more than `limits.total` connections, nor more than
`limits.per_peer` from one address (an IPv4 address and its IPv4-mapped IPv6 form are
one); a connection it chose to close is forgotten at once (its `release` later is a
no-op), so the caller must close it; `release` of a handle it never admitted is a no-op.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import StrEnum

from probemarker.observe.descriptors import ConnectionLimits

__all__ = ["ConnectionGate", "Eviction", "ServerStats", "eviction", "peer_of"]


class Eviction(StrEnum):
    LIMIT = "limit"  # the server held `total` connections: its oldest made room
    PEER_LIMIT = "peer_limit"  # the address held `per_peer`: its own oldest made room


@dataclass(slots=True)
class ServerStats:
    """The server's counters, read by a scrape (observe/metrics.py)."""

    limit: int = 0  # connections held at most (0: no server)
    open: int = 0
    accepted: int = 0
    evicted: Counter[Eviction] = field(default_factory=Counter)
    expired: int = 0  # closed at the end of their lifetime, whatever they were doing
    bad_requests: int = 0  # requests aiohttp could not parse (answered 400)
    accept_errors: Counter[str] = field(default_factory=Counter)  # by errno name


def eviction(*, open_total: int, open_from_peer: int, limits: ConnectionLimits) -> Eviction | None:
    """Why a new connection needs an older one closed first, or None."""
    if open_from_peer >= limits.per_peer:
        return Eviction.PEER_LIMIT
    if open_total >= limits.total:
        return Eviction.LIMIT
    return None


def peer_of(address: object) -> str:
    """The peer's host from an accepted socket's address (`(host, port)` or IPv6's
    4-tuple); an IPv4-mapped IPv6 address (a dual-stack socket) as plain IPv4."""
    host = address[0] if isinstance(address, tuple) and address else address
    text = str(host)
    try:
        parsed = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return text
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return str(parsed)


class ConnectionGate:
    """The open connections, oldest first, by peer; see the module docstring."""

    def __init__(self, limits: ConnectionLimits, stats: ServerStats) -> None:
        self.limits = limits
        self.stats = stats
        stats.limit = limits.total
        self._open: dict[Hashable, str] = {}  # handle -> peer, in order of arrival
        self._by_peer: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"ConnectionGate({self.limits}, open={len(self._open)})"

    def admit(self, handle: Hashable, peer: str) -> Hashable | None:
        """Count `handle` in; the older connection the caller must close for it, if any."""
        why = eviction(
            open_total=len(self._open), open_from_peer=self._by_peer[peer], limits=self.limits
        )
        victim = None
        if why is not None:
            victim = next(h for h, p in self._open.items() if why is Eviction.LIMIT or p == peer)
            self.release(victim)
            self.stats.evicted[why] += 1
        self._open[handle] = peer
        self._by_peer[peer] += 1
        self.stats.open = len(self._open)
        self.stats.accepted += 1
        return victim

    def release(self, handle: Hashable) -> None:
        """`handle`'s connection is over (or was chosen to close)."""
        peer = self._open.pop(handle, None)
        if peer is None:
            return
        self._by_peer[peer] -= 1
        if self._by_peer[peer] <= 0:
            del self._by_peer[peer]
        self.stats.open = len(self._open)
