"""The seam between the engine and the protocol checkers.

Stage: probe. A `ProbeHandler` knows how to check one kind of action (exec, httpGet,
tcpSocket, grpc) against one container and nothing about pods, markers or timing: it
gets the action, the `ProbeTarget` (the pod and container facts it may need) and the
run's timeout, and returns an `Outcome`. It never raises for anything the container
or the network did: those are values (Failed, or Unknown when the probe could not be
run). Only a bug or cancellation escapes.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, Self, runtime_checkable

from probemarker.api.model import Handler
from probemarker.identity.commands import HeldCommand
from probemarker.identity.probes import ProbeKey
from probemarker.probe.outcome import Outcome
from probemarker.watch.pods import ContainerFacts, PodUID, PodView


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """The container a probe runs against."""

    namespace: str
    pod: str
    pod_uid: PodUID
    container: str
    pod_ip: str | None = None
    # The pod status value, `<runtime>://<id>`; only the cri exec backend reads it.
    container_id: str = ""
    ports: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # The probe's identity (the engine's `ProbeKey`), for messages; a command that may
    # outlive its run is held by the command in the container, not by this (probe.holds).
    probe: Hashable | None = None

    def __str__(self) -> str:
        return f"{self.namespace}/{self.pod}/{self.container}"


class ProbeHandler(Protocol):
    """Runs one kind of action; see the module docstring."""

    async def run(self, action: Handler, target: ProbeTarget, *, time_limit: float) -> Outcome: ...


@runtime_checkable
class HoldsCommands(Protocol):
    """A handler whose command may outlive its run (the api exec handler): says when a
    previous run of `action`'s command, by `probe` or any other probe on the same
    container, may still run in the container whose ID is `container_id`, so the
    probe's next period is skipped (`busy`; `skips` when a run of it is due, which
    puts a hold that lasts so long on the pod's record); what the pod's record is to
    say of it (`held`); takes over what the record said of it when the probe starts
    (`seed`), so a restart of the daemon does not forget it; and makes the runs of one
    command in one container take turns (`turn`, entered around a run before its
    deadlines)."""

    def busy(self, action: Handler, probe: ProbeKey, container_id: str) -> bool: ...

    def skips(self, action: Handler, probe: ProbeKey, container_id: str) -> bool: ...

    def held(self, action: Handler, probe: ProbeKey, container_id: str) -> HeldCommand | None: ...

    def seed(
        self, action: Handler, probe: ProbeKey, held: HeldCommand, container_id: str
    ) -> bool: ...

    def turn(
        self, action: Handler, probe: ProbeKey, container_id: str
    ) -> AbstractAsyncContextManager[None]: ...


class OwnsConnections:
    """Base of the handlers that keep connections (or nothing, but look alike): `async
    with handler:` closes them on exit, through the handler's `aclose()`."""

    async def aclose(self) -> None:
        """Close what the handler holds; a later run must not open anything new."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def probe_target(view: PodView, key: ProbeKey, facts: ContainerFacts) -> ProbeTarget:
    """What a handler gets for `key` on `view`'s pod (the daemon's engine and
    `probemarker check` build their targets here)."""
    return ProbeTarget(
        namespace=view.namespace,
        pod=view.name,
        pod_uid=view.uid,
        container=key.container,
        pod_ip=view.pod_ip,
        container_id=facts.container_id,
        ports=facts.ports,
        probe=key,
    )
