"""The daemon's side of the container runtime socket: one channel, Version,
ContainerStatus and ExecSync.

Stage: edge (the container runtime, as `probemarker.kube` is the API server's edge),
used by the cri exec handler (`probemarker.probe.cri`). Input: the socket path
(`endpoint.socket_path`), a container ID and a command. Output: values, never an
exception but cancellation:

- `RuntimeInfo`, `ContainerInfo`: the answers to Version and ContainerStatus;
- `Ran`: the runtime ran the command; its exit code and both streams (raw bytes, as
  received: the caller keeps what it needs);
- `CallFailed`: the call ended with a grpc status (`code` is the StatusCode name,
  `details` the runtime's message), including the ones grpc makes itself:
  UNAVAILABLE when the socket is absent or refuses, DEADLINE_EXCEEDED past the
  deadline, RESOURCE_EXHAUSTED for an answer over `max_receive` bytes;
- `NotConnected`: no call was made: grpcio (the `cri` extra) is missing, or the
  client is closed.

Invariants:
- grpcio and the generated messages are imported on first use only, in a worker
  thread (a fifth of a second and about 10 MB, which a daemon on the api backend
  never pays); `unavailable()` says which extra to install when they are missing;
- one channel for the client's life: one HTTP/2 connection over the socket that
  every call shares, so a slow exec holds no other exec up (the runtime serves
  calls concurrently; the number in flight is the daemon's probe cap). grpc
  reconnects by itself with the kubelet's CRI backoff (100 ms doubling to 3 s), and
  a call while it is down fails at once (`wait_for_ready` off) instead of queueing;
- the channel has its own subchannel pool and no proxy, and a receive cap of
  `max_receive` bytes (the runtime may send 16 MiB per stream; a daemon with a
  160 MiB memory limit and 64 probes at once must not buffer that);
- `refused_for()` says how long every call has been refused (UNAVAILABLE: the socket
  absent or refusing) since the last call that reached the runtime, for /healthz
  (observe/health.py: a stale socket mount after a runtime restart);
- a cancelled call raises the caller's cancellation (anyio's), never grpc.aio's own
  CancelledError, and grpc cancels the call on the runtime's side, which stops the
  command (containerd kills an exec whose request context ends).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread

import probemarker
from probemarker.cri.endpoint import socket_problem
from probemarker.kit.clock import MONOTONIC, Clock

__all__ = [
    "EXTRA_HINT",
    "MAX_RECEIVE",
    "CallFailed",
    "ContainerInfo",
    "NotConnected",
    "Ran",
    "RuntimeClient",
    "RuntimeInfo",
    "missing_library",
]

EXTRA_HINT = "the cri exec backend needs the optional cri extra: pip install 'probemarker[cri]'"
MAX_RECEIVE = 1024 * 1024  # bytes of one answer (stdout + stderr + framing)
_SERVICE = "/runtime.v1.RuntimeService/"
_CLOSE_LIMIT = 5.0  # seconds; closing the channel is local work, this is a safety net


@dataclass(frozen=True, slots=True)
class RuntimeInfo:
    """The runtime's answer to Version: its name is the scheme of its containerIDs."""

    name: str
    version: str
    api_version: str


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    """The runtime's answer to ContainerStatus: the labels the container was made with."""

    id: str
    labels: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Ran:
    """The runtime ran the command."""

    exit_code: int
    stdout: bytes
    stderr: bytes


@dataclass(frozen=True, slots=True)
class CallFailed:
    """The call ended with grpc status `code` (a StatusCode name) and `details`."""

    code: str
    details: str

    def __str__(self) -> str:
        return f"{self.code}: {self.details}" if self.details else self.code


@dataclass(frozen=True, slots=True)
class NotConnected:
    """No call was made; `reason` says why (the extra is missing, the client closed)."""

    reason: str


@dataclass(frozen=True, slots=True)
class _Library:
    grpc: ModuleType
    aio: ModuleType
    messages: ModuleType


def _load() -> _Library | str:
    """grpcio and the generated messages, or why they cannot be used."""
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # as probe.grpc: errors only
    try:
        import grpc
        import grpc.aio

        from probemarker.cri import runtime_v1_pb2
    except Exception as err:  # ImportError; or a protobuf runtime older than the gencode
        return f"{EXTRA_HINT} ({type(err).__name__}: {err})"
    return _Library(grpc, grpc.aio, runtime_v1_pb2)


def missing_library() -> str | None:
    """Why the client cannot run here (the `cri` extra is missing), or None. Imports
    grpcio in this thread: for start-up, before the event loop runs."""
    library = _load()
    return library if isinstance(library, str) else None


class RuntimeClient:
    """A CRI runtime service client over one unix socket; see the module docstring."""

    def __init__(
        self,
        socket: str,
        *,
        max_receive: int = MAX_RECEIVE,
        user_agent: str = f"probemarker/{probemarker.__version__}",
        clock: Clock = MONOTONIC,
    ) -> None:
        if max_receive < 1:
            raise ValueError(f"max_receive must be >= 1, not {max_receive}")
        self.socket = socket
        self._max_receive = max_receive
        self._user_agent = user_agent
        self._library: _Library | str | None = None
        self._channel: Any = None
        self._calls: dict[str, Any] = {}
        self._closed = False
        self._clock = clock
        self._refused_since: float | None = None  # first refusal after an answer
        self._refused_error = ""

    def __repr__(self) -> str:
        return f"RuntimeClient(socket={self.socket!r}, max_receive={self._max_receive})"

    def refused_for(self) -> tuple[float, str]:
        """Seconds that every call has been refused (0 when the last call reached the
        runtime, or none was made), and the last refusal's text."""
        if self._refused_since is None:
            return 0.0, ""
        return self._clock.now() - self._refused_since, self._refused_error

    def _note(self, failed: CallFailed | None) -> None:
        if failed is None or failed.code != "UNAVAILABLE":
            self._refused_since = None
            return
        if self._refused_since is None:
            self._refused_since = self._clock.now()
        self._refused_error = str(failed)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def max_receive(self) -> int:
        return self._max_receive

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    async def unavailable(self) -> str | None:
        """None when the client can make calls here, else why (the extra is missing)."""
        library = await self._loaded()
        return library if isinstance(library, str) else None

    async def version(self, *, wait: float) -> RuntimeInfo | CallFailed | NotConnected:
        """The runtime's Version answer, within `wait` seconds."""
        answer = await self._call("Version", wait, version="v1")
        if isinstance(answer, CallFailed | NotConnected):
            return answer
        return RuntimeInfo(answer.runtime_name, answer.runtime_version, answer.runtime_api_version)

    async def container(
        self, container_id: str, *, wait: float
    ) -> ContainerInfo | CallFailed | NotConnected:
        """The runtime's status of the container (its labels), within `wait` seconds."""
        answer = await self._call("ContainerStatus", wait, container_id=container_id)
        if isinstance(answer, CallFailed | NotConnected):
            return answer
        return ContainerInfo(answer.status.id, dict(answer.status.labels))

    async def exec_sync(
        self, container_id: str, command: Sequence[str], *, time_limit: int, wait: float
    ) -> Ran | CallFailed | NotConnected:
        """Run `command` in the container: the runtime stops it after `time_limit`
        seconds (0: never; ExecSync's `timeout`), the call gives up after `wait` seconds."""
        answer = await self._call(
            "ExecSync",
            wait,
            container_id=container_id,
            cmd=list(command),
            timeout=time_limit,
        )
        if isinstance(answer, CallFailed | NotConnected):
            return answer
        return Ran(answer.exit_code, answer.stdout, answer.stderr)

    async def aclose(self) -> None:
        """Close the channel; calls in flight end CANCELLED, later calls NotConnected."""
        self._closed = True
        channel, self._channel = self._channel, None
        self._calls.clear()
        if channel is not None:
            with anyio.move_on_after(_CLOSE_LIMIT, shield=True):
                await channel.close()

    async def _loaded(self) -> _Library | str:
        if self._library is None:
            library = await anyio.to_thread.run_sync(_load)
            if self._library is None:  # two first calls at once: the first one wins
                self._library = library
        return self._library

    def _callable(self, lib: _Library, method: str) -> Any:
        if self._channel is None:
            options = (
                ("grpc.primary_user_agent", self._user_agent),
                ("grpc.enable_http_proxy", 0),
                ("grpc.use_local_subchannel_pool", 1),
                ("grpc.max_receive_message_length", self._max_receive),
                # The kubelet's CRI client backoff (cri-client remote_runtime.go).
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.min_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", 3000),
            )
            self._channel = lib.aio.insecure_channel(self.endpoint, options=options)
        call = self._calls.get(method)
        if call is None:
            request, response = _MESSAGES[method]
            call = self._channel.unary_unary(
                _SERVICE + method,
                request_serializer=getattr(lib.messages, request).SerializeToString,
                response_deserializer=getattr(lib.messages, response).FromString,
            )
            self._calls[method] = call
        return call

    async def _call(self, method: str, wait: float, **fields: Any) -> Any:
        library = await self._loaded()
        if isinstance(library, str):
            return NotConnected(library)
        if self._closed:
            return NotConnected("the container runtime client is closed")
        call = self._callable(library, method)
        request = getattr(library.messages, _MESSAGES[method][0])(**fields)
        try:
            answer = await call(request, timeout=wait, wait_for_ready=False)
        except asyncio.CancelledError:
            # As probe.grpc: grpc.aio ends a cancelled call with a CancelledError of its
            # own, which anyio's cancel scopes would not recognise; when this task is
            # being cancelled, a checkpoint raises anyio's. A call ended by `aclose`
            # is no cancellation of this task.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                await anyio.lowlevel.checkpoint_if_cancelled()
                raise
            if self.closed:  # read again: `aclose` may have run during the call
                return NotConnected("the container runtime client was closed during the call")
            raise
        except library.aio.AioRpcError as err:
            failed = CallFailed(err.code().name, err.details() or "")
            if failed.code == "UNAVAILABLE":
                # grpc says "Connection refused" for a path that is no socket at all.
                problem = socket_problem(self.socket)
                if problem is not None:
                    failed = CallFailed(failed.code, problem)
            self._note(failed)
            return failed
        self._note(None)
        return answer


# method -> (request message, response message) in runtime_v1_pb2
_MESSAGES: dict[str, tuple[str, str]] = {
    "Version": ("VersionRequest", "VersionResponse"),
    "ContainerStatus": ("ContainerStatusRequest", "ContainerStatusResponse"),
    "ExecSync": ("ExecSyncRequest", "ExecSyncResponse"),
}
