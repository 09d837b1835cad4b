"""What `probemarker run` and `probemarker check` are both built from: the connection,
the client's settings, and the table of probe handlers.

Stage: assembly (wiring, no decisions). Input: `RunSettings`. Output: a `Connection`
(`connect`), the `ClientSettings` that give every probe run and every held exec stream
an exec connection of its own (`client_settings`), and `ProbeHandlers`: one handler per
kind of action (exec, httpGet, tcpSocket, grpc), built once for the settings, entered
and closed together. The daemon (daemon/app.py) runs its probes through them; `check`
(check/run.py) runs a marker's probes once through the same ones, so a dry run and the
daemon cannot drift apart on how a probe is run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Literal, Self

from probemarker.api.model import ExecAction, GRPCAction, HTTPGetAction, TCPSocketAction
from probemarker.cri.client import RuntimeClient
from probemarker.cri.endpoint import socket_path
from probemarker.daemon.settings import RunSettings
from probemarker.kit.clock import Clock
from probemarker.kube.connect.client import ClientSettings, KubeClient
from probemarker.kube.connect.config import Connection, load_incluster, load_kubeconfig
from probemarker.probe.cri import CRIExecHandler
from probemarker.probe.exec import ExecHandler
from probemarker.probe.grpc import GRPCHandler
from probemarker.probe.handler import ProbeHandler
from probemarker.probe.holds import CommandHolds
from probemarker.probe.holdtable import CommandKey, HoldSettings
from probemarker.probe.http import HTTPGetHandler
from probemarker.probe.tcp import TCPSocketHandler

__all__ = [
    "ProbeHandlers",
    "client_settings",
    "connect",
    "exec_connections",
    "probe_handlers",
]


async def connect(settings: RunSettings, environ: Mapping[str, str] | None = None) -> Connection:
    """A kubeconfig when one is named, else the pod's in-cluster configuration."""
    if settings.kubeconfig:
        return await load_kubeconfig(settings.kubeconfig, context=settings.context)
    return load_incluster(environ=dict(os.environ if environ is None else environ))


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


@dataclass(slots=True)
class ProbeHandlers:
    """One handler per kind of action, built once; `opened()` enters them all.

    `exec` is the api backend's (`pods/exec`), `runtime` the cri backend's; exactly one
    of them runs exec probes. A network kind without a handler (`check` without
    --direct) is None: its probes are not run (probe/runner.py says so)."""

    exec: ExecHandler | None = None
    runtime: CRIExecHandler | None = None
    runtime_client: RuntimeClient | None = None
    http: HTTPGetHandler | None = None
    tcp: TCPSocketHandler | None = None
    grpc: GRPCHandler | None = None

    def table(self) -> dict[type, ProbeHandler]:
        """The runner's table: action type -> handler, for the kinds that have one."""
        found: dict[type, ProbeHandler | None] = {
            ExecAction: self.runtime or self.exec,
            HTTPGetAction: self.http,
            TCPSocketAction: self.tcp,
            GRPCAction: self.grpc,
        }
        return {kind: handler for kind, handler in found.items() if handler is not None}

    @contextlib.asynccontextmanager
    async def opened(self) -> AsyncIterator[Self]:
        """Every handler entered (http, tcp, grpc, the runtime, exec: the order the daemon
        has always used), and closed in reverse on the way out."""
        async with contextlib.AsyncExitStack() as stack:
            for handler in (self.http, self.tcp, self.grpc, self.runtime, self.exec):
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
        handlers.http = (
            HTTPGetHandler() if http_idle is None else HTTPGetHandler(max_idle=http_idle)
        )
        handlers.tcp = TCPSocketHandler()
        handlers.grpc = GRPCHandler()  # grpcio is loaded by the first grpc probe, if any
    return handlers
