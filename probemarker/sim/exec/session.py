"""The `pods/exec` subresource over WebSocket, server side.

Stage: called by the sim's HTTP layer once it has found the pod and checked
the container (`exec_target_error`), with the `ExecTarget` it built
(`build_exec_target`). Output: the WebSocket session kube-apiserver plus a
kubelet would give the client, or the HTTP error they would give instead.

What Kubernetes does, and so what this module does:
- A request offering `v5.channel.k8s.io` is served as kube-apiserver's stream
  translator serves it (k8s.io/apiserver/pkg/util/proxy websocket.go and
  streamtranslator.go): only v5 is accepted, the upgrade comes first, and any
  later failure (container not running, runtime error) arrives as a
  `metav1.Status` on the error channel after one more translation by the
  apiserver's SPDY client (hence "Internal error occurred: Internal error
  occurred: ..." for runtime errors).
- Any other WebSocket request goes to the kubelet's streaming server in a real
  cluster (kubelet cri/streaming/remotecommand/websocket.go): subprotocols
  `v4.channel.k8s.io`, `v4.base64.channel.k8s.io`, `channel.k8s.io`,
  `base64.channel.k8s.io` or none; anything else is refused with 403
  (golang.org/x/net/websocket); kubelet errors are plain-text HTTP errors.
- Channels 0 stdin, 1 stdout, 2 stderr, 3 error/status, 4 resize; a frame
  starts with its channel byte (base64 variants: an ASCII digit, then base64,
  in text frames). The server first sends an empty frame on the lowest
  writable channel. v5 adds the close signal: frame [255, ch] half-closes
  channel ch (kubectl sends it when its stdin reaches EOF).
- v4/v5 write a JSON `metav1.Status` (no kind/apiVersion, as Go marshals it):
  Success, or Failure with reason NonZeroExitCode and an ExitCode cause;
  pre-v4 protocols write only a failure's message. Then the server sends a
  WebSocket close (1000) and waits for the client's, as a newer API server's
  `finish` does (apiserver util/proxy/websocket.go). The faults
  `drop_after_close` (close frame, then TCP closed at once: x/net/websocket's
  `Conn.Close` under the kubelet and the 1.30-1.3x translator) and
  `drop_after_status` (TCP closed with no close frame: the client sees 1006)
  play the servers that do not wait.
- A request that is not a WebSocket upgrade gets 400 "Upgrade request
  required" (SPDY is not spoken; kubectl only falls back to it when the
  WebSocket upgrade fails).

Invariants: nothing is sent after the status. When the client goes away (closes
or drops the stream) the command keeps running until it ends, its output read and
dropped, as on a real cluster: containerd's streaming exec runs the command with a
context that nothing cancels and no timeout (`streamRuntime.Exec` calls
`execInContainer(ctrdutil.NamespacedContext(), ...)`, and execInternal waits for the
process to exit), so a client leaving closes only the IO. The session (and its entry
in `ExecSessions`) lasts until then. Only the server going away (`close_all`, the
sim stopping) cancels the command, and the runner kills its process group: the sim's
commands are host processes, which must not outlive it.

Neighbours: `plan` (the answer before any upgrade), `proto`
(subprotocols, options, Status bodies), `target` (pod -> `ExecTarget`),
`runners` (what runs the command), `tracking` (the open sessions).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from probemarker.sim.exec.plan import ExecFaults, Plan, plan_exec
from probemarker.sim.exec.proto import (
    ERROR,
    KUBELET_PROTOCOLS,
    STDERR,
    STDIN,
    STDOUT,
    STREAM_CLOSE,
    V4,
    V4_BASE64,
    V5,
    ExecOptions,
    internal_status,
    kubelet_status,
    status_payload,
    translated_status,
)
from probemarker.sim.exec.runners import ContainerRuntimeError, ExecRequest, ExecRunner, ExecTarget
from probemarker.sim.exec.target import build_exec_target, exec_target_error
from probemarker.sim.exec.tracking import ExecSessions

__all__ = [
    "V4",
    "V4_BASE64",
    "V5",
    "ExecFaults",
    "ExecSessions",
    "build_exec_target",
    "exec_target_error",
    "serve_exec",
]

log = logging.getLogger(__name__)

_MAX_MSG = 32 << 20  # golang.org/x/net/websocket's default MaxPayloadBytes
_CLOSE_TIMEOUT = 5.0
# A server's (unmasked) close frame with status 1000 (RFC 6455 5.5.1).
_CLOSE_FRAME = bytes((0x88, 2)) + WSCloseCode.OK.to_bytes(2, "big")


class _StreamBroken(Exception):
    """The break fault fired: the connection was dropped on purpose."""


class _Session:
    """One WebSocket exec session; also the `ExecIO` the runner writes to."""

    def __init__(
        self,
        ws: web.WebSocketResponse,
        request: web.Request,
        opts: ExecOptions,
        *,
        protocol: str,
        faults: ExecFaults,
    ) -> None:
        self._ws, self._request, self._opts, self._faults = ws, request, opts, faults
        self.start_delay = faults.start_delay
        self.protocol = protocol
        self._base64 = KUBELET_PROTOCOLS.get(protocol, False)
        self._stdin: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._stdin_open = opts.stdin
        self._sent = 0
        # Set once the client has gone: output is then read and dropped, not sent.
        self.gone = False
        self._command: asyncio.Task[int] | None = None

    async def send(self, channel: int, data: bytes) -> None:
        if self._base64:
            await self._ws.send_str(chr(ord("0") + channel) + base64.b64encode(data).decode())
        else:
            await self._ws.send_bytes(bytes((channel,)) + data)

    async def _send_output(self, channel: int, data: bytes) -> None:
        if self.gone:
            return  # nobody reads it: the runtime's copy to a closed stream drops it
        limit = self._faults.break_after_bytes
        if limit is not None and self._sent + len(data) >= limit:
            if limit > self._sent:
                await self.send(channel, data[: limit - self._sent])
            self._sent = limit
            transport = self._request.transport
            if transport is not None:
                transport.close()  # flushes what was sent, then FIN: no close frame, no status
            raise _StreamBroken
        self._sent += len(data)
        try:
            await self.send(channel, data)
        except ConnectionError:
            self.gone = True  # the client left while the command wrote: it runs on

    async def write_stdout(self, data: bytes) -> None:
        if data and self._opts.stdout:
            await self._send_output(STDOUT, data)

    async def write_stderr(self, data: bytes) -> None:
        if not data:
            return
        if self._opts.tty:  # a terminal merges stderr into stdout
            await self.write_stdout(data)
        elif self._opts.stderr:
            await self._send_output(STDERR, data)

    async def read_stdin(self) -> bytes | None:
        if not self._opts.stdin:
            return None
        return await self._stdin.get()

    def _close_stdin(self) -> None:
        if self._stdin_open:
            self._stdin_open = False
            self._stdin.put_nowait(None)

    async def pump_input(self) -> None:
        """Read client frames until the connection ends; stdin goes to the queue."""
        try:
            async for msg in self._ws:
                if msg.type is WSMsgType.BINARY:
                    self._on_frame(msg.data)
                elif msg.type is WSMsgType.TEXT:
                    self._on_frame(msg.data.encode())
        finally:
            self._close_stdin()

    def _on_frame(self, frame: bytes) -> None:
        if not frame:
            return
        channel, data = frame[0], frame[1:]
        if self._base64:
            channel -= ord("0")
            try:
                data = base64.b64decode(data, validate=True)
            except binascii.Error:
                log.debug("exec.bad_base64_frame")
                return
        if channel == STREAM_CLOSE and self.protocol == V5:
            if len(data) == 1 and data[0] == STDIN:
                self._close_stdin()
        elif channel == STDIN and self._stdin_open and data:
            self._stdin.put_nowait(data)
        # resize (4) and frames for unknown channels are ignored, as wsstream does

    async def run(
        self, runner: ExecRunner, target: ExecTarget, reader: asyncio.Task[None]
    ) -> int | str | None:
        """Run the command: its exit code, a runtime error, or None (no status to send)."""
        exec_request = ExecRequest(
            target=target, command=self._opts.command, stdin=self._opts.stdin, tty=self._opts.tty
        )
        command = asyncio.create_task(runner.run(exec_request, self))
        self._command = command
        try:
            await asyncio.wait({reader, command}, return_when=asyncio.FIRST_COMPLETED)
            if not command.done():
                # The client went away first: the command runs on to its end, as
                # containerd's streaming exec lets it (see the module docstring).
                self.gone = True
                await asyncio.wait({command})
            if self.gone or command.cancelled():
                return None  # no one to tell, or the server is going away (`kill`)
            try:
                return command.result()
            except ContainerRuntimeError as err:
                return str(err)
            except _StreamBroken:
                return None
            except Exception as err:  # a broken handler: the kubelet reports any error
                if self._ws.closed:
                    return None  # it failed writing to a connection that is gone
                log.exception("exec.runner_failed")
                return f"{type(err).__name__}: {err}"
        finally:
            # Await the cancelled command as the reader is awaited below, so the runner's
            # cleanup (killing the process group) has finished when the session ends.
            command.cancel()
            await asyncio.gather(command, return_exceptions=True)
            await asyncio.gather(command, return_exceptions=True)

    def kill(self) -> None:
        """The server is going away: cancel the command (its process group is killed)."""
        if self._command is not None:
            self._command.cancel()

    async def finish(self, status: Mapping[str, Any] | None) -> None:
        """Write the status (if any), then close the WebSocket (1000) and await the reply
        (or, with a `drop_*` fault, drop the connection without awaiting it)."""
        with contextlib.suppress(ConnectionError):
            if status is not None and not self._ws.closed:
                payload = status_payload(self.protocol, status)
                if payload:
                    await self.send(ERROR, payload)
            if self._faults.drop_after_status or self._faults.drop_after_close:
                self._drop(close_frame=not self._faults.drop_after_status)
                return
            await self._ws.close()

    def _drop(self, *, close_frame: bool) -> None:
        transport = self._request.transport
        if transport is None:
            return
        if close_frame:
            # aiohttp's close() would wait for the client's reply: write the frame
            # itself (what x/net/websocket's Conn.Close writes), in order after the status.
            transport.write(_CLOSE_FRAME)
        transport.close()  # flushes what was sent, then FIN; the client's close is never read


async def serve_exec(
    request: web.Request,
    *,
    target: ExecTarget,
    runner: ExecRunner,
    faults: ExecFaults,
    sessions: ExecSessions | None = None,
) -> web.StreamResponse:
    """Serve one `pods/exec` request for `target` (whose pod and container are valid).

    `sessions`, if given, tracks the WebSocket while it is open (see `ExecSessions`).
    """
    plan = plan_exec(request, target, faults)
    if isinstance(plan, web.Response):
        return plan
    ws = web.WebSocketResponse(
        protocols=(plan.protocol,) if plan.protocol else (),
        compress=False,
        max_msg_size=_MAX_MSG,
        timeout=_CLOSE_TIMEOUT,
    )
    await ws.prepare(request)
    session = _Session(ws, request, plan.opts, protocol=plan.protocol, faults=faults)
    reader = asyncio.create_task(session.pump_input())
    if sessions is not None:
        sessions.add(ws, stop=session.kill)
    try:
        if faults.stall:
            await reader  # upgraded, never answers; over when the client leaves
            return ws
        await _converse(session, plan, runner=runner, target=target, reader=reader)
    except ConnectionError:
        log.debug("exec.client_gone")
    finally:
        if sessions is not None:
            sessions.discard(ws)
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
    return ws


async def _converse(
    session: _Session,
    plan: Plan,
    *,
    runner: ExecRunner,
    target: ExecTarget,
    reader: asyncio.Task[None],
) -> None:
    opts = plan.opts
    # An empty frame on the lowest writable channel tells the client the
    # connection is established (kubelet and translator alike).
    await session.send(STDOUT if opts.stdout else STDERR if opts.stderr else ERROR, b"")
    if session.start_delay > 0:
        await asyncio.sleep(session.start_delay)  # the runtime starting the process
    status: dict[str, Any] | None = None
    if plan.failure is not None:
        status = internal_status(plan.failure)
    else:
        outcome = await session.run(runner, target, reader)
        if session.gone:
            return  # the command ended after its client left: nothing to send
        if outcome is not None:
            status = kubelet_status(opts.command, outcome)
            if plan.protocol == V5:
                status = translated_status(status)
    # Stop reading the client's frames before the status, as the API server's finish()
    # closes its input channels: the close below then reads the client's reply itself
    # instead of aiohttp dropping the connection for a concurrent reader.
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    await session.finish(status)
