"""Fault injection for the simulated API server, switchable at run time.

`Faults` is the one object tests use to make the sim misbehave:

* `fail_requests(...)`: answer a share of matching requests with 429 (with a
  Retry-After header), 500 or 503 instead of serving them;
* `add_latency(...)`: delay matching requests before they are served;
* `close_watches()`: end every open watch stream now (cleanly, as a server
  timeout does, or abruptly, as a dropped connection does);
* `drop_history()`: forget the store's event history, so that any watch
  resumed from an older resourceVersion gets 410 Gone;
* `stall_watches()`: make every open watch half-open (nothing more is sent, the
  connection stays open and the server's own timeout no longer ends it; with
  `new_too=True` later watches too, until `unstall_watches()`);
* `exec`: the exec engineer's `ExecFaults` (break or stall exec streams);
* `take_down()` / `bring_up()` / `outage(seconds)`: close the listening
  socket (connections are refused) and reopen it on the same port.

Invariants: matching rules draw their share in the order they were added, the
first that fires wins (two rules of share 0.5 fail 75% of requests); a rule with
`times` stops matching once it has fired that many times; the random choice for
`share` comes from a seeded generator, so a run is reproducible.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from probemarker.sim.exec.session import ExecFaults
from probemarker.sim.server.handlers.watching import WatchRegistry

# 429/5xx: overload and failure; 401/403: authentication and RBAC refusals (403 with
# the authorizer's message naming user, verb, resource and namespace); 404/409/410/422
# and 400: an answer of that status with a generic Status, for error-mapping tests.
FAILURE_CODES = frozenset({400, 401, 403, 404, 409, 410, 422, 429, 500, 503})


class Listener(Protocol):
    """What the faults need from the server's listening socket."""

    async def stop_listening(self) -> None: ...

    async def start_listening(self) -> None: ...


@dataclass(frozen=True, slots=True)
class RequestKey:
    """What a rule matches on: the request's RequestInfo verb and resource."""

    verb: str
    resource: str
    subresource: str


@dataclass(slots=True)
class FailureRule:
    """Fail a share of matching requests with `code`.  Mutable: counts its firings."""

    code: int
    share: float = 1.0
    verb: str | None = None
    resource: str | None = None
    subresource: str | None = None
    retry_after: int = 1
    times: int | None = None
    fired: int = 0

    def matches(self, key: RequestKey) -> bool:
        return (
            (self.verb is None or self.verb == key.verb)
            and (self.resource is None or self.resource == key.resource)
            and (self.subresource is None or self.subresource == key.subresource)
            and (self.times is None or self.fired < self.times)
        )


@dataclass(frozen=True, slots=True)
class LatencyRule:
    seconds: float
    verb: str | None = None
    resource: str | None = None
    subresource: str | None = None

    def matches(self, key: RequestKey) -> bool:
        return (
            (self.verb is None or self.verb == key.verb)
            and (self.resource is None or self.resource == key.resource)
            and (self.subresource is None or self.subresource == key.subresource)
        )


@dataclass(slots=True)
class _Hooks:
    close_watches: Callable[[bool], int] = lambda abrupt: 0
    drop_history: Callable[[], None] = lambda: None
    listener: Listener | None = None
    watches: WatchRegistry | None = None


class Faults:
    """Run-time switchable faults; see the module docstring."""

    def __init__(self, *, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._failures: list[FailureRule] = []
        self._latencies: list[LatencyRule] = []
        self.exec = ExecFaults()
        self._hooks = _Hooks()
        self._down = False

    def bind(
        self,
        *,
        close_watches: Callable[[bool], int],
        drop_history: Callable[[], None],
        listener: Listener | None,
        watches: WatchRegistry | None = None,
    ) -> None:
        """Connect the faults to a running server (done by SimCluster)."""
        self._hooks = _Hooks(close_watches, drop_history, listener, watches)

    # -- request failures and latency ------------------------------------------------

    def fail_requests(
        self,
        *,
        code: int,
        share: float = 1.0,
        verb: str | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        retry_after: int = 1,
        times: int | None = None,
    ) -> FailureRule:
        """Answer `share` of matching requests with `code` (one of FAILURE_CODES)."""
        if code not in FAILURE_CODES:
            raise ValueError(f"code must be one of {sorted(FAILURE_CODES)}, not {code}")
        if not 0.0 <= share <= 1.0:
            raise ValueError("share must be within [0, 1]")
        rule = FailureRule(
            code=code,
            share=share,
            verb=verb,
            resource=resource,
            subresource=subresource,
            retry_after=retry_after,
            times=times,
        )
        self._failures.append(rule)
        return rule

    def add_latency(
        self,
        seconds: float,
        *,
        verb: str | None = None,
        resource: str | None = None,
        subresource: str | None = None,
    ) -> LatencyRule:
        rule = LatencyRule(seconds, verb, resource, subresource)
        self._latencies.append(rule)
        return rule

    def remove(self, rule: FailureRule | LatencyRule) -> None:
        if isinstance(rule, FailureRule):
            self._failures = [r for r in self._failures if r is not rule]
        else:
            self._latencies = [r for r in self._latencies if r is not rule]

    def clear(self) -> None:
        """Remove every failure and latency rule and reset the exec faults."""
        self._failures.clear()
        self._latencies.clear()
        self.exec.reset()

    def failure_for(self, key: RequestKey) -> FailureRule | None:
        """The rule that fails this request, if any (counts the firing): the matching
        rules draw their share in the order they were added; the first that fires wins."""
        for rule in self._failures:
            if rule.matches(key) and (rule.share >= 1.0 or self._rng.random() < rule.share):
                rule.fired += 1
                return rule
        return None

    def latency_for(self, key: RequestKey) -> float:
        return sum(rule.seconds for rule in self._latencies if rule.matches(key))

    # -- streams and history -----------------------------------------------------------

    def close_watches(self, *, abrupt: bool = False) -> int:
        """End every open watch stream now; returns how many were closed."""
        return self._hooks.close_watches(abrupt)

    def drop_history(self) -> None:
        """Forget the store's history: resuming from any older version gives 410."""
        self._hooks.drop_history()

    def stall_watches(self, *, new_too: bool = False) -> int:
        """Make every open watch half-open (and every later one, with `new_too`):
        nothing more is sent, the connection stays open and `timeoutSeconds` no longer
        ends it, until the client leaves. Returns how many open watches were stalled."""
        return self._require_watches().stall_all(new_too)

    def unstall_watches(self) -> None:
        """Serve watches opened from now on again (stalled ones stay half-open)."""
        self._require_watches().unstall_new()

    def _require_watches(self) -> WatchRegistry:
        if self._hooks.watches is None:
            raise RuntimeError("faults are not bound to a running server's watches")
        return self._hooks.watches

    # -- API server down ---------------------------------------------------------------

    @property
    def down(self) -> bool:
        return self._down

    async def take_down(self) -> None:
        """Close the listening socket and every open watch: connections are refused."""
        listener = self._require_listener()
        if self._down:
            return
        self._down = True
        self._hooks.close_watches(True)
        await listener.stop_listening()

    async def bring_up(self) -> None:
        """Listen again on the same port."""
        listener = self._require_listener()
        if not self._down:
            return
        await listener.start_listening()
        self._down = False

    async def outage(
        self, seconds: float, *, during: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Be down for `seconds` (or while `during()` runs), then come back up."""
        await self.take_down()
        try:
            if during is not None:
                await during()
            else:
                await asyncio.sleep(seconds)
        finally:
            await self.bring_up()

    def _require_listener(self) -> Listener:
        if self._hooks.listener is None:
            raise RuntimeError("faults are not bound to a running server")
        return self._hooks.listener


__all__ = ["FailureRule", "Faults", "LatencyRule", "RequestKey"]
