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
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, Self, runtime_checkable

from probemarker.api.model import Handler
from probemarker.match.identity import HeldCommand, ProbeKey
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
    # The probe's identity (the engine's `ProbeKey`): a handler that may leave a command
    # running keys it by this, so one probe never runs two at once (probe.holds).
    probe: Hashable | None = None

    def __str__(self) -> str:
        return f"{self.namespace}/{self.pod}/{self.container}"


class ProbeHandler(Protocol):
    """Runs one kind of action; see the module docstring."""

    async def run(self, action: Handler, target: ProbeTarget, *, time_limit: float) -> Outcome: ...


@runtime_checkable
class HoldsCommands(Protocol):
    """A handler whose command may outlive its run (the api exec handler): says when
    the probe's previous run of `action`'s command may still run in the container
    whose ID is `container_id`, so its next period is skipped (`busy`); what the pod's
    record is to say of it (`held`); and takes over what the record said of it when
    the probe starts (`seed`), so a restart of the daemon does not forget it."""

    def busy(self, action: Handler, probe: Hashable, container_id: str) -> bool: ...

    def held(self, action: Handler, probe: Hashable, container_id: str) -> HeldCommand | None: ...

    def seed(
        self, action: Handler, probe: Hashable, held: HeldCommand, container_id: str
    ) -> bool: ...


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
