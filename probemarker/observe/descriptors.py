"""The process's open-files limit, and the share of it the health and metrics server
may hold.

Stage: start-up (edge: `getrlimit`/`setrlimit`) and configuration (pure). Inputs: the
process's `RLIMIT_NOFILE`. Outputs: `raise_open_files_limit()` lifts the soft limit to
the hard one once, at start-up, and says what it did (`OpenFiles`);
`connection_limits(soft)` (pure) is how many connections the health and metrics server
may hold at once, in all and from one peer address; `idle_http_connections(soft)`
(pure) how many idle httpGet keep-alive connections the probes may keep.

Why raise the soft limit: every probe run, exec stream, watch, write and idle httpGet
keep-alive connection is a descriptor, and a node's worth of them grows with its pods.
Container runtimes often start containers with a soft limit of 1024 under a much
higher hard one, a soft limit that exists for programs still using `select()` (which
cannot watch descriptors above 1023). The daemon waits with epoll (asyncio) and never
calls `select()`, so it takes what the hard limit allows, as Go programs do since Go
1.19. Where soft and hard are equal (`prlimit --nofile=1024:1024`) nothing changes.

Why a limit of the server's own, below the soft limit: the port answers anyone who
can reach it, and a descriptor it holds is one a probe or the API traffic cannot have.
It may hold at most 1/16 of the soft limit, and never more than 64 (the kubelet's two
probes and a scrape or two need a handful): with 1024, 64 connections and 960
descriptors the server can never take. One peer address may hold at most a quarter
of those, so a single pod flooding the port leaves room for the kubelet's probes,
which come from the node's address.

Why a limit on idle httpGet connections: the pool keeps one connection per pod
address probed within its keep-alive time (probe/http.py), so a node's idle
descriptors grow with its pods, and each is one a probe run, an exec stream or a
watch cannot have. It may keep at most 1/8 of the soft limit, from 8 to 1024 (a
node's pods, with room): with 1024, 128 idle connections; beyond them a probe
connects afresh each run, as the kubelet's probes always do (it disables keep-alive).
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from typing import Final

__all__ = [
    "MAX_CONNECTIONS",
    "MIN_CONNECTIONS",
    "ConnectionLimits",
    "OpenFiles",
    "connection_limits",
    "idle_http_connections",
    "open_files_limit",
    "raise_open_files_limit",
]

MAX_CONNECTIONS: Final = 64
MIN_CONNECTIONS: Final = 4  # the kubelet's liveness and readiness probes, a scrape, one spare
SHARE: Final = 16  # the server may hold at most 1/SHARE of the soft limit
PEER_SHARE: Final = 4  # one peer address at most 1/PEER_SHARE of the server's limit
IDLE_HTTP_SHARE: Final = 8  # idle httpGet connections at most 1/IDLE_HTTP_SHARE of the limit
MIN_IDLE_HTTP: Final = 8
MAX_IDLE_HTTP: Final = 1024


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Connections the health and metrics server holds at once, at most."""

    total: int
    per_peer: int

    def __post_init__(self) -> None:
        if not 1 <= self.per_peer <= self.total:
            raise ValueError(f"need 1 <= per_peer <= total, not {self}")


def connection_limits(soft_limit: int) -> ConnectionLimits:
    """See the module docstring: 1/16 of `soft_limit`, from 4 to 64; a peer a quarter
    of that, at least 2 (the kubelet's two probes may come at once)."""
    total = max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, soft_limit // SHARE))
    return ConnectionLimits(total=total, per_peer=max(2, total // PEER_SHARE))


def idle_http_connections(soft_limit: int) -> int:
    """See the module docstring: 1/8 of `soft_limit`, from 8 to 1024."""
    return max(MIN_IDLE_HTTP, min(MAX_IDLE_HTTP, soft_limit // IDLE_HTTP_SHARE))


@dataclass(frozen=True, slots=True)
class OpenFiles:
    """The open-files limit before and after `raise_open_files_limit`."""

    before: int
    soft: int
    hard: int
    error: str | None = None  # why it could not be raised

    @property
    def raised(self) -> bool:
        return self.soft > self.before


def open_files_limit() -> int:
    """The soft limit now; `resource.RLIM_INFINITY` counts as very large."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _finite(soft)


def raise_open_files_limit() -> OpenFiles:
    """The soft limit raised to the hard one (see the module docstring). A refusal (a
    hard limit above what the kernel allows) leaves it as it was, and says why."""
    raw_soft, raw_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    soft, hard = _finite(raw_soft), _finite(raw_hard)
    if soft >= hard:
        return OpenFiles(before=soft, soft=soft, hard=hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (raw_hard, raw_hard))
    except (OSError, ValueError) as err:
        return OpenFiles(before=soft, soft=soft, hard=hard, error=str(err))
    return OpenFiles(before=soft, soft=hard, hard=hard)


def _finite(value: int) -> int:
    # RLIM_INFINITY (Linux refuses it as a soft limit of open files: at most
    # fs.nr_open) reads as a number larger than any real limit.
    return 1 << 30 if value == resource.RLIM_INFINITY else value
