"""The httpGet handler's keep-alive pool: idle connections bounded, and shared by namespace.

Stage: probe (owned by probe/http.py's handler). Input: the connections aiohttp
releases after a run (`_release`), and which namespace each pod address is probed for
(`own`). Output: whether a released connection is kept idle, and the counts
(`PoolStats`, `idle`, `idle_by_namespace`) for the metrics.

Why a bound: an idle connection is a file descriptor, one per pod address probed
within the keep-alive time; the daemon gives the pool a share of its open-files limit
(observe/descriptors.py), and an answered connection beyond it is closed, not kept.
The addresses already kept stay kept: with periodic probes, evicting the oldest
instead would make every address reconnect in turn.

Why shares (issue 40): the node's namespaces share the bound. A namespace that keeps
fewer than its share (kit/shares.py: `max_idle` / the namespaces keeping any, itself
included) when the pool is full has the oldest idle connection of the namespace
keeping the most closed for it. Nobody waits either way: a connection not kept costs
a connect (what the kubelet does every run), never a slot or a timeout.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import aiohttp

from probemarker.kit.shares import yielder
from probemarker.probe.ports import Address

__all__ = ["BoundedConnector", "PoolStats"]


@dataclass(slots=True)
class PoolStats:
    """What the keep-alive pool gave up (observe/metrics.py)."""

    not_kept: int = 0  # answered connections closed, not kept: `max_idle` were idle
    given_up: int = 0  # idle connections closed for another namespace's share


class BoundedConnector(aiohttp.TCPConnector):
    """aiohttp's TCPConnector keeps every connection released to it (its `limit` counts
    only those in use): this one keeps at most `max_idle` idle, shared by namespace (the
    module docstring), and closes a released connection instead once that many are idle
    and its namespace keeps its share. `_release` and `_conns` (per key, a deque of
    (protocol, time), oldest first) are aiohttp's (the same from 3.9 to 3.14);
    tests/probe/test_http_probe.py checks the bound and the shares."""

    def __init__(self, *, max_idle: int, stats: PoolStats, keepalive_timeout: float) -> None:
        super().__init__(limit=0, keepalive_timeout=keepalive_timeout)
        self._max_idle, self._stats = max_idle, stats
        # (host, port) -> the namespace of the pod it was last probed for (`owner`)
        self.owners: dict[tuple[str, int], str] = {}

    @property
    def idle(self) -> int:
        return sum(map(len, self._conns.values()))

    def idle_by_namespace(self) -> Counter[str]:
        return Counter(
            self._owner(key) for key, conns in self._conns.items() for _ in range(len(conns))
        )

    def own(self, address: Address, namespace: str) -> None:
        """`address` is probed for a pod of `namespace`. What is remembered is bounded:
        past the idle bound's worth, the addresses with no idle connection are forgotten
        (a run in flight for one of them counts its connection as nobody's)."""
        self.owners[(address.host, address.port)] = namespace
        if len(self.owners) > 2 * self._max_idle + 1024:
            idle = {(key.host, key.port) for key in self._conns}
            self.owners = {a: ns for a, ns in self.owners.items() if a in idle}
            self.owners[(address.host, address.port)] = namespace

    def _owner(self, key: Any) -> str:
        return self.owners.get((key.host, key.port), "")

    def _release(self, key: Any, protocol: Any, *, should_close: bool = False) -> None:
        keep = not (should_close or protocol.should_close)
        if keep and self.idle >= self._max_idle and not self._make_room(self._owner(key)):
            should_close = True
            self._stats.not_kept += 1
        super()._release(key, protocol, should_close=should_close)

    def _make_room(self, namespace: str) -> bool:
        """Close the oldest idle connection of the namespace keeping the most, if
        `namespace` keeps fewer than its share (kit.shares.yielder)."""
        giver = yielder(self._max_idle, self.idle_by_namespace(), namespace)
        if giver is None:
            return False
        oldest = min(
            (
                (stamp, key, entry)
                for key, conns in self._conns.items()
                if self._owner(key) == giver
                for entry in conns
                for stamp in (entry[1],)
            ),
            default=None,
            key=lambda found: found[0],
        )
        if oldest is None:
            return False
        _, key, entry = oldest
        conns = self._conns[key]
        conns.remove(entry)
        if not conns:
            del self._conns[key]
        entry[0].close()
        self._stats.given_up += 1
        return True
