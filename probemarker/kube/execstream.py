"""Run a command in a container through `pods/exec` over WebSocket.

Stage: used by the exec probe handler. Input: a `KubeClient`, the pod, container and
argv, and a deadline. Output: one `ExecResult` value (execresult.py), never an
exception other than cancellation: `ExecExited`, `ExecNotStarted` or
`ExecTransportError`.

What is sent: `GET /api/v1/namespaces/{ns}/pods/{pod}/exec?command=...&container=...
&stdout=true&stderr=true` (stdin and tty off, so stdout and stderr stay apart and
nothing is ever written to the server), offering the subprotocols
`v5.channel.k8s.io` and `v4.channel.k8s.io`. A 1.30+ API server answers v5 itself and
talks SPDY to the kubelet; a 1.28/1.29 one passes the upgrade to the kubelet, whose
WebSocket server speaks v4. Both frame data the same way for us (channel byte, data).

Invariants:
- One deadline covers the handshake, the run and the close. When it expires
  before the status arrived, the socket is aborted (no close handshake) so the
  server sees the client gone and kills the command; the result says so.
- A complete status decides the result: a connection dropped after it (a Go
  server closes TCP right after its close frame) is a normal end. A stream that
  ends without a status is a transport error.
- Cancellation aborts the socket too, then propagates.
- Memory is bounded: 1 KiB kept per stream, the rest read and counted.
- Only the client's error tree is caught here, never aiohttp's exceptions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from probemarker.kube.client import KubeClient, WebSocket, WsClose
from probemarker.kube.errors import ApiError, ApiForbidden, ApiTimeout, KubeError
from probemarker.kube.execresult import (
    ExecFrames,
    ExecResult,
    ExecTransportError,
    TransportFailure,
)
from probemarker.kube.resources import PODS

__all__ = ["V4", "V5", "ExecSettings", "run_exec"]

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"


@dataclass(frozen=True, slots=True)
class ExecSettings:
    protocols: tuple[str, ...] = (V5, V4)  # offered, in order of preference
    keep_bytes: int = 1024  # kept per output stream (SPEC §2: 1 KiB)
    max_status_bytes: int = 64 << 10  # a Status is a few hundred bytes

    def __post_init__(self) -> None:
        # Only v4 and v5 frame binary data with a JSON Status on channel 3; the
        # base64 and pre-v4 variants would need another reader.
        if not self.protocols or not set(self.protocols) <= {V5, V4}:
            raise ValueError(f"protocols must be among {(V5, V4)}, not {self.protocols}")
        if self.keep_bytes < 0 or self.max_status_bytes < 1:
            raise ValueError("keep_bytes must be >= 0 and max_status_bytes >= 1")


# RBAC for a WebSocket exec: 1.28 authorises the GET as `get`; newer API servers also
# check `create` (as SPDY's POST always was). The Forbidden names the verb it lacked.
_RBAC_HINT = "; a WebSocket exec needs both 'get' and 'create' on pods/exec"


async def run_exec(
    client: KubeClient,
    *,
    namespace: str,
    pod: str,
    container: str,
    command: Sequence[str],
    deadline: float,
    settings: ExecSettings | None = None,
) -> ExecResult:
    """Run `command` in `container` of `pod` within `deadline` seconds; see the module."""
    settings = settings or ExecSettings()
    end = asyncio.get_running_loop().time() + deadline
    info = PODS.info("get", namespace, pod, "exec")
    path = PODS.path(namespace, pod, "exec")
    params = [("command", arg) for arg in command]
    params += [("container", container), ("stdout", "true"), ("stderr", "true")]
    async with contextlib.AsyncExitStack() as stack:
        opened = client.websocket(
            path,
            info=info,
            params=params,
            protocols=settings.protocols,
            deadline=max(0.0, end - asyncio.get_running_loop().time()),
        )
        ws = await _handshake(stack, opened, end=end, deadline=deadline)
        if isinstance(ws, ExecTransportError):
            return ws
        result = await _converse(ws, end=end, deadline=deadline, settings=settings)
        # Marked once here: after the upgrade, a deadline is the command's, not the network's.
        return replace(result, upgraded=True) if isinstance(result, ExecTransportError) else result


async def _handshake(
    stack: contextlib.AsyncExitStack,
    opened: contextlib.AbstractAsyncContextManager[WebSocket],
    *,
    end: float,
    deadline: float,
) -> WebSocket | ExecTransportError:
    """Enter the WebSocket into `stack` by `end`, or say why it could not be opened."""
    try:
        async with asyncio.timeout_at(end):
            return await stack.enter_async_context(opened)
    except TimeoutError:
        return _expired(deadline, "before the WebSocket handshake completed")
    except ApiTimeout as err:
        if asyncio.get_running_loop().time() >= end:
            return _expired(deadline, "before the WebSocket handshake completed")
        # The client's own connect timeout, shorter than our deadline.
        return ExecTransportError(TransportFailure.UNREACHABLE, str(err))
    except ApiError as err:
        hint = _RBAC_HINT if isinstance(err, ApiForbidden) else ""
        return ExecTransportError(TransportFailure.REFUSED, f"{err}{hint}", err.code)
    except KubeError as err:
        return ExecTransportError(TransportFailure.UNREACHABLE, str(err))


def _expired(deadline: float, when: str) -> ExecTransportError:
    return ExecTransportError(
        TransportFailure.DEADLINE, f"the deadline of {deadline:g}s expired {when}"
    )


async def _converse(
    ws: WebSocket, *, end: float, deadline: float, settings: ExecSettings
) -> ExecResult:
    """Read the session to its end; abort the socket on anything but a clean finish."""
    if ws.protocol not in settings.protocols:
        ws.abort()
        return ExecTransportError(
            TransportFailure.PROTOCOL,
            f"the server chose the subprotocol {ws.protocol!r}, not one of {settings.protocols}",
        )
    frames = ExecFrames(keep=settings.keep_bytes, max_status=settings.max_status_bytes)
    finished = False
    try:
        async with asyncio.timeout_at(end):
            result = await _read(ws, frames)
        finished = True
        return result
    except TimeoutError:
        # Whatever the status said stands; without one, the command is abandoned and
        # the aborted socket makes the server kill it.
        return frames.result() or _expired(deadline, "before the command's exit status")
    except KubeError as err:
        return frames.result() or ExecTransportError(TransportFailure.LOST, str(err))
    finally:
        if not finished:
            ws.abort()


async def _read(ws: WebSocket, frames: ExecFrames) -> ExecResult:
    while True:
        item = await ws.receive()
        if isinstance(item, WsClose):
            return frames.closed(code=item.code, abnormal=item.abnormal, detail=item.detail)
        frames.feed(item.data)
        if isinstance(frames.outcome, ExecTransportError):
            ws.abort()  # a broken status: nothing more is worth reading, or waiting for
            return frames.outcome
