"""What `probemarker run` and `probemarker check` are both built from: the client's
settings and the table of probe handlers (the connection is kube/connect/config.py's
`connect`).

Stage: assembly (wiring, no decisions). Input: `RunSettings`. Output: the
`ClientSettings` that give every probe run and every held exec stream
an exec connection of its own (`client_settings`), and `ProbeHandlers`: one handler per
kind of action (exec, httpGet, tcpSocket, grpc), built once for the settings, entered
and closed together. The daemon (daemon/app.py) runs its probes through them; `check`
(check/run.py) runs a marker's probes once through the same ones, so a dry run and the
daemon cannot drift apart on how a probe is run.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, Self

from probemarker.api.model import ExecAction, GRPCAction, HTTPGetAction, TCPSocketAction
from probemarker.cri.client import RuntimeClient
from probemarker.cri.endpoint import socket_path
from probemarker.daemon.settings import RunSettings
from probemarker.kit.clock import Clock
from probemarker.kube.connect.client import ClientSettings, KubeClient
from probemarker.probe.cri import CRIExecHandler
from probemarker.probe.exec import ExecHandler
from probemarker.probe.grpc import GRPCHandler
from probemarker.probe.handler import ProbeHandler
from probemarker.probe.holds import CommandHolds
from probemarker.probe.holdtable import CommandKey, HoldSettings
from probemarker.probe.http import HTTPGetHandler
from probemarker.probe.tcp import TCPSocketHandler

__all__ = [
    "NETWORK_KINDS",
    "NetworkHandler",
    "ProbeHandlers",
    "client_settings",
    "exec_connections",
    "probe_handlers",
]


def exec_connections(settings: RunSettings) -> int:
    """Exec connections needed: one per probe run allowed at once, plus one per exec
    stream held past its deadline (probe/holds.py), so neither ever waits for one."""
    return settings.max_concurrent_probes + settings.max_held_exec_streams


def client_settings(settings: RunSettings) -> ClientSettings:
    """The client for these settings: an exec connection for every probe run allowed at
    once and every held exec stream (`exec_connections`), so a running exec probe never
    waits for a connection (its timeoutSeconds is its own), and the watches, patches and
    events keep pools of their own."""
    return ClientSettings(exec_connections=exec_connections(settings))


class NetworkHandler(ProbeHandler, Protocol):
    """A network kind's handler: runs its probes, and is entered and closed with the
    others (`probe.handler.OwnsConnections`)."""

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc_info: object) -> None: ...


# The network probe kinds, each named once: its action type (api/model.py, whose `kind`
# is the probe field) and how its handler is made (`http_idle`: the keep-alive
# connections an httpGet handler may keep, None: its default). A new network kind is a
# row here; exec is the backends' (`probe_handlers`).
NETWORK_KINDS: tuple[tuple[type, Callable[[int | None], NetworkHandler]], ...] = (
    (HTTPGetAction, lambda idle: HTTPGetHandler() if idle is None else HTTPGetHandler(max_idle=idle)),
    (TCPSocketAction, lambda idle: TCPSocketHandler()),
    (GRPCAction, lambda idle: GRPCHandler()),  # grpcio is loaded by the first grpc probe, if any
)  # fmt: skip


@dataclass(slots=True)
class ProbeHandlers:
    """One handler per kind of action, built once; `opened()` enters them all.

    `exec` is the api backend's (`pods/exec`), `runtime` the cri backend's; exactly one
    of them runs exec probes. `network`: the network kinds' handlers by action type
    (`NETWORK_KINDS`); none without the network (`check` without --direct): their
    probes are not run (probe/runner.py says so)."""

    exec: ExecHandler | None = None
    runtime: CRIExecHandler | None = None
    runtime_client: RuntimeClient | None = None
    network: dict[type, NetworkHandler] = field(default_factory=dict)

    @property
    def http(self) -> HTTPGetHandler | None:
        """The httpGet handler (its keep-alive pool is counted in /metrics), if any."""
        handler = self.network.get(HTTPGetAction)
        return handler if isinstance(handler, HTTPGetHandler) else None

    def table(self) -> dict[type, ProbeHandler]:
        """The runner's table: action type -> handler, for the kinds that have one."""
        exec_handler: ProbeHandler | None = self.runtime or self.exec
        return ({} if exec_handler is None else {ExecAction: exec_handler}) | self.network

    @contextlib.asynccontextmanager
    async def opened(self) -> AsyncIterator[Self]:
        """Every handler entered (the network kinds', then the runtime, then exec), and
        closed in reverse on the way out."""
        async with contextlib.AsyncExitStack() as stack:
            for handler in (*self.network.values(), self.runtime, self.exec):
                if handler is not None:
                    await stack.enter_async_context(handler)
            yield self


def probe_handlers(
    client: KubeClient,
    settings: RunSettings,
    *,
    clock: Clock,
    backend: Literal["api", "cri"] | None = None,
    network: bool = True,
    http_idle: int | None = None,
    changed: Callable[[CommandKey], None] = lambda key: None,
) -> ProbeHandlers:
    """The handlers these settings make.

    `backend`: how exec probes run (default: `settings.exec_backend`): "api" through
    `pods/exec` with the holds of commands that outlive their timeout (`changed(key)`:
    a hold of a command in a pod started or ended, probe/holds.py), "cri" through the
    runtime socket. `network`: whether httpGet, tcpSocket and grpc probes connect from
    here to the pod IP (the daemon; `check --direct`). `http_idle`: the keep-alive
    connections the httpGet handler may keep (None: its default)."""
    handlers = ProbeHandlers()
    if (backend or settings.exec_backend) == "cri":
        handlers.runtime_client = RuntimeClient(socket_path(settings.cri_endpoint), clock=clock)
        handlers.runtime = CRIExecHandler(
            handlers.runtime_client, grace=settings.exec_grace_seconds
        )
    else:
        holds = HoldSettings(
            limit=settings.exec_hold_seconds, max_streams=settings.max_held_exec_streams
        )
        handlers.exec = ExecHandler(
            client,
            grace=settings.exec_grace_seconds,
            holds=CommandHolds(settings=holds, clock=clock, changed=changed),
        )
    if network:
        handlers.network = {action: make(http_idle) for action, make in NETWORK_KINDS}
    return handlers
