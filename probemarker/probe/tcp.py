"""The tcpSocket probe handler: a TCP connect to the pod IP, as the kubelet makes it.

Stage: probe. Input: a `TCPSocketAction`, the `ProbeTarget` and the run's time limit.
Output: an `Outcome`, never an exception but cancellation.

| what happened | outcome | message |
|---|---|---|
| the connection was accepted | Succeeded | "" |
| refused, unreachable, reset | Failed | the error, naming the address |
| no answer within the time limit (a filtered port) | Failed | "timed out after Ns" |
| no pod IP, a port name the container lacks | Unknown | why (the engine reports the port) |
| a local shortage (file descriptors, buffers, memory) | Unknown | the error |

The connection is closed as soon as it is made, and nothing is sent: the connect is
the probe, so there is no connection to reuse.
"""

from __future__ import annotations

import asyncio
import socket

import anyio

from probemarker.api.model import Handler, TCPSocketAction
from probemarker.probe.handler import OwnsConnections, ProbeTarget
from probemarker.probe.outcome import Outcome
from probemarker.probe.ports import NoAddress, address_of, local_shortage, os_reason

__all__ = ["TCPSocketHandler"]


async def _connect(host: str, port: int) -> None:
    """Connect and close. A bare non-blocking socket on the running asyncio loop (the
    daemon's loop; aiohttp needs asyncio anyway): `anyio.connect_tcp` costs twice the
    CPU per connect for its happy-eyeballs task group, which an IP literal never needs
    (bench/probe_cost.py)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, port))


class TCPSocketHandler(OwnsConnections):
    """Runs tcpSocket actions; see the module docstring. Holds nothing between runs,
    but is an async context manager like the other network handlers."""

    def __repr__(self) -> str:
        return "TCPSocketHandler()"

    async def run(self, action: Handler, target: ProbeTarget, *, time_limit: float) -> Outcome:
        if not isinstance(action, TCPSocketAction):
            raise TypeError(f"TCPSocketHandler cannot run {type(action).__name__}")
        address = address_of(action.port, target)
        if isinstance(address, NoAddress):
            return Outcome.unknown(address.reason)
        with anyio.move_on_after(time_limit):
            try:
                await _connect(address.host, address.port)
            except OSError as err:
                message = f"cannot connect to {address}: {os_reason(err)}"
                return Outcome.unknown(message) if local_shortage(err) else Outcome.failed(message)
            return Outcome.succeeded(answer="")  # connected: an answer with no words
        return Outcome.failed(f"connect to {address} timed out after {time_limit:g}s")
