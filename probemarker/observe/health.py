"""Liveness and readiness: what /healthz and /readyz answer.

Stage: observation. Inputs: a `Heartbeat` (a task that measures how late the event
loop wakes it), the informers (`Watched`: how far past its own deadline each loop is,
whether it synced, why it last failed), and the daemon's `ready` and `stopping`
events. Output: a `Report` (ok, and one line per problem) for each endpoint; the
decisions are pure functions (`liveness`, `readiness`) over plain numbers.

Liveness fails only for what a restart of the process fixes (the kubelet restarts
the container when it fails): an event loop that no longer wakes its tasks on time
(a blocking call, a busy loop), an informer loop hung past a deadline of its own
(a read that should have timed out and did not), or, with `--exec-backend cri`, a
container runtime socket that has refused every call for `runtime_refused_max`
seconds: containerd re-creates its socket when it restarts, and the daemon's
bind mount of the socket file still names the old one, so only a new container
(a new mount) reaches the runtime again. A runtime that is really down is not
fixed by the restart, but the kubelet cannot restart anything without it either:
the restart happens once the runtime is back, which is when it helps. An API server that is unreachable
or refuses is not a liveness failure: the informers retry with backoff, and a restart
would only add load to a server in trouble; it shows on /readyz and in the logs.

Readiness: both informers synced and the engine started (`Daemon.ready`). Before
that, the report names what is awaited and the informer's last failure (an API server
it cannot reach, a CRD not installed). A daemon that stops stays ready (200, `ok:
stopping`): the kubelet keeps probing the readiness of a pod being deleted until its
containers have stopped (`SyncTerminatingPod`: only liveness and startup probes stop
first), and records every failure as a Warning `Unhealthy` event, so a 503 while
stopping made a normal stop raise a Warning. Nothing needs the 503: a pod being
deleted is already out of its Service's ready endpoints (terminating), the DaemonSet
controller counts it as going away, and the daemon has no Service anyway.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio

from probemarker.kit.clock import Clock

__all__ = [
    "Health",
    "HealthSettings",
    "Heartbeat",
    "Report",
    "Watched",
    "liveness",
    "readiness",
]


@dataclass(frozen=True, slots=True)
class HealthSettings:
    heartbeat: float = 1.0  # seconds between the heartbeat's wake-ups
    # The loop is not answering when the heartbeat wakes this much later than asked. A
    # busy daemon is late by milliseconds; seconds mean something blocks the loop.
    loop_late_max: float = 5.0
    # A loop is hung this long past its own deadline (a read deadline that should have
    # fired); the margin keeps a slow but working machine from counting as hung.
    stuck_after: float = 60.0
    # The runtime socket (cri backend) refused every call this long: a stale mount.
    runtime_refused_max: float = 60.0

    def __post_init__(self) -> None:
        if (
            self.heartbeat <= 0
            or self.loop_late_max <= 0
            or self.stuck_after < 0
            or self.runtime_refused_max < 0
        ):
            raise ValueError(
                "health needs heartbeat > 0, loop_late_max > 0, stuck_after >= 0, "
                "runtime_refused_max >= 0"
            )


@dataclass(frozen=True, slots=True)
class Report:
    ok: bool
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class Watched(Protocol):
    """What health needs of an informer."""

    @property
    def name(self) -> str: ...

    @property
    def synced(self) -> anyio.Event: ...

    @property
    def problem(self) -> str | None: ...

    def overdue(self) -> float: ...


class Refusals(Protocol):
    """What health needs of the container runtime client (cri backend)."""

    @property
    def endpoint(self) -> str: ...

    def refused_for(self) -> tuple[float, str]: ...


class Heartbeat:
    """Wakes every `interval` seconds and notes how late it woke: the loop's lag."""

    def __init__(self, *, clock: Clock, interval: float) -> None:
        self._clock = clock
        self.interval = interval
        self.last = math.inf  # when it last woke (or started); inf: not running
        self.lag = 0.0  # how late that was

    def __repr__(self) -> str:
        return f"Heartbeat(interval={self.interval:g}, lag={self.lag:.3f})"

    async def run(self) -> None:
        self.last = self._clock.now()
        while True:
            before = self._clock.now()
            await self._clock.sleep(self.interval)
            self.last = self._clock.now()
            self.lag = max(0.0, self.last - before - self.interval)

    def late(self) -> float:
        """How late the loop is: the last wake-up's lag, or more if the next one is
        overdue already (a loop blocked now, seen by the first task that runs)."""
        return max(self.lag, self._clock.now() - self.last - self.interval)


def liveness(
    *,
    loop_late: float,
    overdue: Mapping[str, float],
    settings: HealthSettings,
    runtime: tuple[str, float, str] | None = None,
) -> Report:
    """Alive unless the loop is late, an informer is hung, or the runtime socket
    (`runtime`: its endpoint, for how long every call was refused, the last error)
    refuses for too long; see the module docstring."""
    problems = []
    if loop_late > settings.loop_late_max:
        problems.append(
            f"event loop: {loop_late:.1f}s late waking a timer (bound "
            f"{settings.loop_late_max:g}s): something blocks it"
        )
    for name, seconds in sorted(overdue.items()):
        if seconds > settings.stuck_after:
            problems.append(
                f"informer {name}: hung {seconds:.0f}s past its own deadline "
                f"(bound {settings.stuck_after:g}s)"
            )
    if runtime is not None and runtime[1] > settings.runtime_refused_max:
        endpoint, seconds, error = runtime
        problems.append(
            f"container runtime at {endpoint}: every call refused for {seconds:.0f}s (bound "
            f"{settings.runtime_refused_max:g}s; {error}): a runtime that re-created its "
            "socket is reached again through a new mount, after a restart"
        )
    if problems:
        return Report(False, tuple(problems))
    return Report(True, (f"ok: event loop late {loop_late:.3f}s",))


@dataclass(frozen=True, slots=True)
class InformerState:
    name: str
    synced: bool
    problem: str | None


def readiness(*, ready: bool, stopping: bool, informers: Sequence[InformerState]) -> Report:
    """Ready once the engine started, and still while stopping (see the module
    docstring); a daemon stopped before it was ready stays not ready."""
    if ready:
        return Report(True, ("ok: stopping",) if stopping else ("ok",))
    lines = []
    for informer in informers:
        if informer.synced:
            continue
        why = f": {informer.problem}" if informer.problem else ""
        lines.append(f"informer {informer.name}: waiting for its first list{why}")
    return Report(False, tuple(lines) or ("starting the engine",))


class Health:
    """The endpoints' answers from the daemon's live parts."""

    def __init__(
        self,
        *,
        heartbeat: Heartbeat,
        informers: Sequence[Watched],
        ready: anyio.Event,
        stopping: anyio.Event,
        settings: HealthSettings,
        runtime: Refusals | None = None,
    ) -> None:
        self.heartbeat = heartbeat
        self._runtime = runtime
        self._informers = tuple(informers)
        self._ready = ready
        self._stopping = stopping
        self.settings = settings

    def liveness(self) -> Report:
        runtime = None
        if self._runtime is not None:
            runtime = (self._runtime.endpoint, *self._runtime.refused_for())
        return liveness(
            loop_late=self.heartbeat.late(),
            overdue={i.name: i.overdue() for i in self._informers},
            settings=self.settings,
            runtime=runtime,
        )

    def readiness(self) -> Report:
        return readiness(
            ready=self._ready.is_set(),
            stopping=self._stopping.is_set(),
            informers=[
                InformerState(i.name, i.synced.is_set(), i.problem) for i in self._informers
            ],
        )
