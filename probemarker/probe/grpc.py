"""The grpc probe handler: `grpc.health.v1.Health/Check` against the pod IP.

Stage: probe. Input: a `GRPCAction` (port number, optional service name), the
`ProbeTarget` and the run's time limit. Output: an `Outcome`, never an exception but
cancellation (and a `TypeError` for an action that is not grpc, a bug in the caller).

As the kubelet's `pkg/probe/grpc`: a plaintext connection (no TLS), our user agent,
one `Check` with `service` (empty for the server's overall health), and every answer
from the container or its network is Failed, never Unknown:

| what happened | outcome | message |
|---|---|---|
| SERVING | Succeeded | (empty); the answer (`{{.Result}}`) is the status name |
| any other status | Failed | `service unhealthy (responded with NOT_SERVING)` |
| UNIMPLEMENTED | Failed | `this server does not implement the grpc health protocol ...` |
| NOT_FOUND | Failed | `service "x" is unknown to the server (NOT_FOUND)` |
| refused, reset, unreachable | Failed | `cannot connect to <ip:port>: <why>` |
| no connection within the time limit | Failed | `timed out after Ns connecting to <ip:port>` |
| connected, no answer within the limit | Failed | `timed out after Ns: <ip:port> did not answer ...` |
| any other status code | Failed | `health check failed with <CODE>: <details>` |
| no pod IP (or not an IP), a port out of range | Unknown | why (`ports.address_of`) |
| grpcio or grpcio-health-checking missing | Unknown | which extra to install |
| the handler closed before or during the run | Unknown | so |

One difference, in speed only: the kubelet dials with `WithBlock`, so a refused
connection is retried until the timeout; here it fails at once (`wait_for_ready`
off), with the reason. Both are Failed.

Invariants:
- the only host is the pod IP, given to grpc as an `ipv4:`/`ipv6:` address: no name
  lookup, and the HTTP proxy variables (`https_proxy`, `grpc_proxy`) are ignored, so
  nothing is probed on or through any other host;
- the time limit covers connecting and the call (one grpc deadline); a timed-out call
  is cancelled by grpc;
- one channel (one HTTP/2 connection) per pod IP and port, shared by the runs against
  it. A channel that did not end its run with a working connection (refused, timed
  out, not connected) is dropped and closed after its last run, so the next run
  connects afresh instead of waiting out grpc's reconnect backoff or a connection
  attempt that hangs. Each channel has its own subchannels (no global pool), so a
  fresh channel really is a fresh connection. A channel unused for `idle_close`
  seconds is closed (checked on each run, and on a timer every `idle_close / 4` while
  any channel is open), so a pod that went away leaves nothing open; `aclose()`
  closes them all;
- a new channel is made only with file descriptors to spare (`fd_shortage`), as grpc
  aborts the process where a socket would fail with EMFILE; short of them, Unknown;
- a cancelled run raises the caller's cancellation (never grpc.aio's own
  CancelledError, which anyio would not recognise) and drops the channel it was on;
- grpcio is imported on the first grpc run (or `unavailable()`) only, in a worker
  thread: it costs about 10 MB of memory, which a daemon without grpc probes never
  pays, and a fifth of a second, which no other probe waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import time
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread

import probemarker
from probemarker.api.model import GRPCAction, Handler
from probemarker.probe.handler import OwnsConnections, ProbeTarget
from probemarker.probe.outcome import Outcome
from probemarker.probe.output import clean_message
from probemarker.probe.ports import Address, NoAddress, address_of

__all__ = [
    "EXTRA_HINT",
    "GRPCHandler",
    "fd_shortage",
    "grpc_target",
    "rpc_failure",
    "serving_outcome",
]

EXTRA_HINT = "grpc probes need the optional grpc extra: pip install 'probemarker[grpc]'"

_RECEIVE_LIMIT = 64 * 1024  # a health answer is a few bytes; refuse a flood early
_CLOSED_IN_RUN = "the grpc probe handler was closed during the run"
_CLOSE_LIMIT = 5.0  # seconds; closing a channel is local work, this is a safety net
_SWEEP_FLOOR = 0.05  # seconds between timer sweeps at the least
_FD_MARGIN = 32  # descriptors a new channel leaves spare (its poller, sockets, wakeups)


@dataclass(frozen=True, slots=True)
class _Library:
    grpc: ModuleType
    aio: ModuleType
    health_pb2: ModuleType
    health_pb2_grpc: ModuleType


def _load() -> _Library | str:
    """The grpc modules, or why they cannot be used."""
    # grpc's C core logs INFO lines to stderr (a GOAWAY from a restarting pod, say)
    # unless told otherwise; every answer reaches us as a status, so keep it to errors.
    # Read once, when grpc is first imported; a user's own setting wins.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    try:
        import grpc
        import grpc.aio
        from grpc_health.v1 import health_pb2, health_pb2_grpc
    except Exception as err:  # ImportError; or RuntimeError: grpcio older than the stubs
        return f"{EXTRA_HINT} ({type(err).__name__}: {err})"
    return _Library(grpc, grpc.aio, health_pb2, health_pb2_grpc)


def grpc_target(address: Address) -> str:
    """`address` as a grpc target that involves no resolver: `ipv4:a.b.c.d:p`, `ipv6:[h]:p`."""
    family = "ipv6" if ":" in address.host else "ipv4"
    return f"{family}:{address.authority}"


@dataclass(slots=True)
class _Channel:
    """One grpc.aio channel to one pod IP and port, shared by the runs against it."""

    channel: Any
    check: Any  # the Health/Check callable bound to `channel`
    last_used: float
    active: int = 0  # runs using it now
    pooled: bool = True  # False once dropped: its last run closes it
    closed: bool = False


class GRPCHandler(OwnsConnections):
    """`ProbeHandler` for grpc actions; an async context manager owning its channels."""

    def __init__(
        self,
        *,
        user_agent: str = f"probemarker/{probemarker.__version__}",
        idle_close: float = 60.0,
    ) -> None:
        if idle_close < 0:
            raise ValueError(f"idle_close must be >= 0, not {idle_close}")
        self._user_agent = user_agent
        self._idle_close = idle_close
        self._library: _Library | str | None = None
        self._channels: dict[Address, _Channel] = {}
        self._next_sweep = 0.0
        self._closed = False
        self._sweeper: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return (
            f"GRPCHandler(user_agent={self._user_agent!r}, idle_close={self._idle_close:g}, "
            f"channels={len(self._channels)})"
        )

    async def aclose(self) -> None:
        """Close every channel; runs in flight end Unknown, later runs too."""
        self._closed = True
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
        entries = list(self._channels.values())
        self._channels.clear()
        for entry in entries:
            entry.pooled = False
            await self._close(entry)

    async def unavailable(self) -> str | None:
        """None when grpc probes can run here, else why (see `_loaded`)."""
        library = await self._loaded()
        return library if isinstance(library, str) else None

    async def _loaded(self) -> _Library | str:
        """The grpc modules, or why they are missing. Loaded on the first call (a daemon
        asks only when a grpc probe is about to run), in a worker thread: the import
        takes a fifth of a second, which would stall every probe."""
        if self._library is None:
            library = await anyio.to_thread.run_sync(_load)
            if self._library is None:  # two first runs at once: the first one wins
                self._library = library
        return self._library

    async def run(self, action: Handler, target: ProbeTarget, *, time_limit: float) -> Outcome:
        if not isinstance(action, GRPCAction):
            raise TypeError(f"GRPCHandler runs grpc actions, not {type(action).__name__}")
        address = address_of(action.port, target)
        if isinstance(address, NoAddress):
            return Outcome.unknown(address.reason)
        library = await self._loaded()
        if isinstance(library, str):
            return Outcome.unknown(library)
        if self._closed:
            return Outcome.unknown("the grpc probe handler is closed")
        await self._sweep()
        if address not in self._channels and (short := fd_shortage()) is not None:
            return Outcome.unknown(short)
        entry = self._acquire(library, address)
        working = False
        try:
            outcome, working = await self._check(
                library, entry, address, action.service or "", time_limit
            )
        finally:
            await self._release(address, entry, working=working)
        return replace(outcome, message=clean_message(outcome.message))

    async def _check(
        self, lib: _Library, entry: _Channel, address: Address, service: str, time_limit: float
    ) -> tuple[Outcome, bool]:
        """The outcome of one Check, and whether the channel is worth keeping."""
        request = lib.health_pb2.HealthCheckRequest(service=service)
        try:
            response = await entry.check(request, timeout=time_limit, wait_for_ready=False)
        except asyncio.CancelledError:
            # grpc.aio ends a cancelled call with a CancelledError of its own, without
            # the message by which anyio tells its cancel scope's cancellation (so a
            # `move_on_after` would let it through): when this task is being cancelled,
            # a checkpoint makes anyio raise its own. A call ended by `aclose` closing
            # the channel is no cancellation of this task: not ours to pass on.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                await anyio.lowlevel.checkpoint_if_cancelled()
                raise
            if entry.closed:
                return Outcome.unknown(_CLOSED_IN_RUN), False
            raise
        except lib.aio.AioRpcError as err:
            if self._closed:
                return Outcome.unknown(_CLOSED_IN_RUN), False
            code: str = err.code().name
            connected = entry.channel.get_state() == lib.grpc.ChannelConnectivity.READY
            outcome = rpc_failure(
                code,
                err.details() or "",
                service=service,
                address=address,
                time_limit=time_limit,
                connected=connected,
            )
            # A deadline on a connection that looks fine may be a peer that vanished
            # without a reset: start the next run on a new connection.
            return outcome, connected and code != "DEADLINE_EXCEEDED"
        status: str = lib.health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
        return serving_outcome(status, service=service), True

    def _acquire(self, lib: _Library, address: Address) -> _Channel:
        entry = self._channels.get(address)
        if entry is None:
            options = (
                ("grpc.primary_user_agent", self._user_agent),
                ("grpc.default_authority", address.authority),  # as the kubelet: ip:port
                # Never through a proxy from the environment: the pod IP only (docs/security.md).
                ("grpc.enable_http_proxy", 0),
                # Own subchannels, so a dropped channel's connection is not reused.
                ("grpc.use_local_subchannel_pool", 1),
                ("grpc.max_receive_message_length", _RECEIVE_LIMIT),
            )
            channel = lib.aio.insecure_channel(grpc_target(address), options=options)
            check = lib.health_pb2_grpc.HealthStub(channel).Check
            entry = _Channel(channel, check, time.monotonic())
            self._channels[address] = entry
            if self._sweeper is None or self._sweeper.done():
                self._sweeper = asyncio.get_running_loop().create_task(self._sweep_until_empty())
        entry.active += 1
        return entry

    async def _release(self, address: Address, entry: _Channel, *, working: bool) -> None:
        entry.active -= 1
        entry.last_used = time.monotonic()
        if not working and self._channels.get(address) is entry:
            del self._channels[address]
            entry.pooled = False
        if not entry.pooled and entry.active == 0:
            await self._close(entry)

    async def _sweep(self) -> None:
        """Close the channels unused for `idle_close` seconds (at most every quarter)."""
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self._idle_close / 4
        idle = [
            address
            for address, entry in self._channels.items()
            if entry.active == 0 and now - entry.last_used >= self._idle_close
        ]
        # Out of the pool before the first await, so no run picks one up meanwhile.
        entries = [self._channels.pop(address) for address in idle]
        for entry in entries:
            entry.pooled = False
            await self._close(entry)

    async def _sweep_until_empty(self) -> None:
        """While channels are open, sweep them on a timer too: a channel whose pod went
        away gets no more runs to sweep it. Ends with the last channel (a new channel
        starts it again), so a daemon without grpc probes has no such timer."""
        interval = max(self._idle_close / 4, _SWEEP_FLOOR)
        while True:
            await asyncio.sleep(interval)
            self._next_sweep = 0.0
            await self._sweep()
            if not self._channels:
                return

    async def _close(self, entry: _Channel) -> None:
        if entry.closed:
            return
        entry.closed = True
        # Shielded: a run cancelled by the runner's safety net still closes its channel.
        with anyio.move_on_after(_CLOSE_LIMIT, shield=True):
            await entry.channel.close()


def fd_shortage(*, margin: int = _FD_MARGIN, fd_dir: str = "/proc/self/fd") -> str | None:
    """Why a new channel must not be made now, or None: grpc's C core aborts the whole
    process (SIGABRT) when it cannot get a file descriptor for a new channel's poller,
    where a socket would raise EMFILE. So a new channel needs `margin` descriptors to
    spare under the soft RLIMIT_NOFILE (counted in /proc/self/fd on Linux; elsewhere
    nothing is checked)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        in_use = len(os.listdir(fd_dir))
    except OSError:
        return None
    if soft - in_use >= margin:
        return None
    return (
        f"too few file descriptors left for a new grpc connection ({in_use} of {soft} in "
        f"use, {margin} kept spare); raise the daemon's open-files limit"
    )


def serving_outcome(status: str, *, service: str) -> Outcome:
    """The outcome of a Check answer with serving status `status` (an enum name)."""
    if status == "SERVING":
        return Outcome.succeeded(answer=status)
    subject = f'service "{service}"' if service else "service"
    return Outcome.failed(f"{subject} unhealthy (responded with {status})", answer=status)


def rpc_failure(
    code: str,
    details: str,
    *,
    service: str,
    address: Address,
    time_limit: float,
    connected: bool,
) -> Outcome:
    """The outcome of a Check that ended with status `code` (a grpc StatusCode name)."""
    where, limit = address.authority, f"{time_limit:g}s"
    if code == "UNIMPLEMENTED":
        text = "this server does not implement the grpc health protocol (grpc.health.v1.Health)"
    elif code == "NOT_FOUND":
        subject = f'service "{service}"' if service else 'the overall health (service "")'
        text = f"{subject} is unknown to the server (NOT_FOUND)"
        details = ""  # the servicer says nothing more (an empty detail, as a rule)
    elif code == "DEADLINE_EXCEEDED" and connected:
        text = f"timed out after {limit}: {where} did not answer the health check"
        details = ""
    elif code == "DEADLINE_EXCEEDED":
        text, details = f"timed out after {limit} connecting to {where}", ""
    elif code == "UNAVAILABLE" and not connected:
        # grpc says "failed to connect to all addresses; last error: UNKNOWN:
        # ipv4:<ip:port>: Failed to connect to remote host: Connection refused";
        # keep what follows the address, the address is ours.
        text, details = f"cannot connect to {where}", details.rpartition(f"{where}: ")[2]
    else:
        text = f"health check failed with {code}"
    return Outcome.failed(f"{text}: {details}" if details else text)
