"""Run a command in a container through `pods/exec` over WebSocket.

Stage: used by the exec probe handler. Input: a `KubeClient`, the pod, container and
argv, the command's time limit, and optionally a `StreamHolder` to keep a stream
whose command outlived its limit. Output: one `ExecResult` value (execresult.py),
never an exception other than cancellation: `ExecExited`, `ExecNotStarted` or
`ExecTransportError`.

What is sent: `GET /api/v1/namespaces/{ns}/pods/{pod}/exec?command=...&container=...
&stdout=true&stderr=true` (stdin and tty off, so stdout and stderr stay apart and
nothing is ever written to the server), offering the subprotocols
`v5.channel.k8s.io` and `v4.channel.k8s.io`. A 1.30+ API server answers v5 itself and
talks SPDY to the kubelet; a 1.28/1.29 one passes the upgrade to the kubelet, whose
WebSocket server speaks v4. Both frame data the same way for us (channel byte, data).

Two clocks (issue 23):
- the command's: `time_limit` seconds from the server's first frame, the empty
  "connection established" frame every v4/v5 server sends right after the upgrade
  (`createWebSocketStreams` in the kubelet's and containerd's streaming server, and
  in the 1.30+ API server's stream translator, which sends it before it even dials
  the kubelet). It is the latest point the protocol marks: nothing says when the
  command itself has started. Running out is the verdict "timed out" (`timed_out`).
- the client's: `wait` seconds from the call (the caller's time limit and grace,
  probe/limits.py), for the handshake and the established frame (and, as an outer
  bound, everything), until `gives_up_at`. Running out before the command's clock
  started (or ran out) is not the command's fault: Unknown.

Invariants:
- A complete status decides the result: a connection dropped after it (a Go
  server closes TCP right after its close frame) is a normal end. A stream that
  ends without a status is a transport error.
- Closing the stream does not stop the command on a real cluster (docs/kube-exec.md).
  So once the server has upgraded, a stream whose deadline passed without a status
  is given to `holder` (it is read on until the command's end, `HeldStream`) when
  the holder admits it; otherwise, and on cancellation, the socket is aborted. A held
  stream that ends without a status says so (`finish()` is False): the command may
  still run.
- Memory is bounded: 1 KiB kept per stream, the rest read and counted, while held too.
- Only the client's error tree is caught here, never aiohttp's exceptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.errors import ApiError, ApiForbidden, ApiTimeout, KubeError
from probemarker.kube.connect.resources import PODS
from probemarker.kube.connect.websocket import WebSocket, WsClose
from probemarker.probe.execresult import (
    ExecFrames,
    ExecResult,
    ExecTransportError,
    TransportFailure,
)

__all__ = ["V4", "V5", "ExecSettings", "HeldStream", "StreamHolder", "run_exec"]

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"


@dataclass(frozen=True, slots=True)
class ExecSettings:
    protocols: tuple[str, ...] = (V5, V4)  # offered, in order of preference
    keep_bytes: int = 1024  # kept per output stream (docs/engine.md: 1 KiB)
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


class StreamHolder(Protocol):
    """Where a stream whose command may still run goes (`probe.holds.HoldSlot`)."""

    def admit(self) -> bool:
        """Whether it can take one now."""

    def hold(self, stream: HeldStream) -> None: ...


class HeldStream:
    """An exec whose run ended before its command: read on (output past the caps
    dropped) until the status or the connection's end, then closed."""

    def __init__(self, ws: WebSocket, frames: ExecFrames, stack: contextlib.AsyncExitStack) -> None:
        self._ws, self._frames, self._stack = ws, frames, stack

    def __repr__(self) -> str:
        return f"HeldStream(frames={self._frames!r})"

    async def finish(self) -> bool:
        """Until the stream ends; then it is closed (aborted on cancellation or a
        broken stream). True when the command's exit status came: it has ended; False
        when the connection ended without it (an API server or kubelet going away cuts
        the stream, not the command)."""
        clean = False
        try:
            while self._frames.outcome is None:
                item = await self._ws.receive()
                if isinstance(item, WsClose):
                    break
                self._frames.feed(item.data)
            clean = not isinstance(self._frames.outcome, ExecTransportError)
        except KubeError:
            pass  # the connection ended, without the status
        finally:
            if not clean:
                self._ws.abort()
            await self._stack.aclose()
        # Any status, even one we cannot read, comes after the command's end.
        return self._frames.outcome is not None

    def abort(self) -> None:
        self._ws.abort()


async def run_exec(
    client: KubeClient,
    *,
    namespace: str,
    pod: str,
    container: str,
    command: Sequence[str],
    time_limit: float,
    wait: float,
    settings: ExecSettings | None = None,
    holder: StreamHolder | None = None,
) -> ExecResult:
    """Run `command` in `container` of `pod`; `time_limit`: the command's, in seconds
    from the server's established frame; `wait`: the client's, in seconds from the call
    (see the module docstring for both clocks)."""
    settings = settings or ExecSettings()
    loop = asyncio.get_running_loop()
    gives_up_at = loop.time() + wait
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
            wait=max(0.0, gives_up_at - loop.time()),
        )
        ws = await _handshake(stack, opened, gives_up_at=gives_up_at, wait=wait)
        if isinstance(ws, ExecTransportError):
            return ws
        result, running = await _converse(
            ws, time_limit=time_limit, gives_up_at=gives_up_at, settings=settings
        )
        if running is not None:
            # The command may still run: never leave it unwatched if it can be helped.
            if holder is not None and holder.admit():
                holder.hold(HeldStream(ws, running, stack.pop_all()))
            else:
                ws.abort()
        # Marked once here: the server had accepted the exec.
        return replace(result, upgraded=True) if isinstance(result, ExecTransportError) else result


async def _handshake(
    stack: contextlib.AsyncExitStack,
    opened: contextlib.AbstractAsyncContextManager[WebSocket],
    *,
    gives_up_at: float,
    wait: float,
) -> WebSocket | ExecTransportError:
    """Enter the WebSocket into `stack` by `gives_up_at`, or say why it could not be
    opened (`wait`: the seconds the client waits in all, for the message)."""
    try:
        async with asyncio.timeout_at(gives_up_at):
            return await stack.enter_async_context(opened)
    except TimeoutError:
        return _expired(wait, "before the WebSocket handshake completed")
    except ApiTimeout as err:
        if asyncio.get_running_loop().time() >= gives_up_at:
            return _expired(wait, "before the WebSocket handshake completed")
        # The client's own connect timeout, shorter than our deadline.
        return ExecTransportError(TransportFailure.UNREACHABLE, str(err))
    except ApiError as err:
        hint = _RBAC_HINT if isinstance(err, ApiForbidden) else ""
        return ExecTransportError(TransportFailure.REFUSED, f"{err}{hint}", err.code)
    except KubeError as err:
        return ExecTransportError(TransportFailure.UNREACHABLE, str(err))


def _expired(seconds: float, when: str) -> ExecTransportError:
    return ExecTransportError(
        TransportFailure.DEADLINE, f"the deadline of {seconds:g}s expired {when}"
    )


async def _converse(
    ws: WebSocket, *, time_limit: float, gives_up_at: float, settings: ExecSettings
) -> tuple[ExecResult, ExecFrames | None]:
    """Read the session to its end; abort the socket on anything but a clean finish.

    Returns the result and, when a deadline passed before the command's end, the
    frames read so far (the command may still run: the caller holds or aborts)."""
    if ws.protocol not in settings.protocols:
        ws.abort()
        return ExecTransportError(
            TransportFailure.PROTOCOL,
            f"the server chose the subprotocol {ws.protocol!r}, not one of {settings.protocols}",
        ), None
    frames = ExecFrames(keep=settings.keep_bytes, max_status=settings.max_status_bytes)
    loop = asyncio.get_running_loop()
    verdict_at = math.inf  # the command's clock starts with the first frame
    handed_over = False
    try:
        while True:
            try:
                async with asyncio.timeout_at(min(verdict_at, gives_up_at)):
                    item = await ws.receive()
            except TimeoutError:
                done = frames.result()
                if done is not None:
                    return done, None  # whatever the status said stands
                handed_over = True
                return _late(verdict_at, gives_up_at, time_limit), frames
            if verdict_at == math.inf:
                verdict_at = loop.time() + time_limit
            if isinstance(item, WsClose):
                handed_over = True  # closed already
                return frames.closed(
                    code=item.code, abnormal=item.abnormal, detail=item.detail
                ), None
            frames.feed(item.data)
            if isinstance(frames.outcome, ExecTransportError):
                return frames.outcome, None  # a broken status: nothing more is worth reading
    except KubeError as err:
        return frames.result() or ExecTransportError(TransportFailure.LOST, str(err)), None
    finally:
        if not handed_over:
            ws.abort()


def _late(verdict_at: float, gives_up_at: float, time_limit: float) -> ExecTransportError:
    """Which deadline passed first, the command's or the client's."""
    if verdict_at <= gives_up_at:
        return replace(_expired(time_limit, "before the command's exit status"), timed_out=True)
    if verdict_at == math.inf:
        return ExecTransportError(
            TransportFailure.DEADLINE,
            "the client's deadline expired after the upgrade, before the server's first "
            "frame (the exec was never established; its command may still start)",
        )
    return ExecTransportError(
        TransportFailure.DEADLINE,
        "the client's deadline expired before the command's exit status (the exec was "
        f"established too late for its {time_limit:g}s limit to run out first)",
    )
