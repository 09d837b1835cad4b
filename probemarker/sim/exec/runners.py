"""What runs a command that a client execs into a simulated container.

Stage: the sim's stand-in for the container runtime behind the kubelet's
streaming server. Input: an `ExecRequest` (which container, which argv) and
an `ExecIO` (the WebSocket channels as seen by the process). Output: the
exit code, or `ContainerRuntimeError` when the runtime could not start the
command at all (as containerd reports "executable file not found in $PATH").

Two runners:
- `SubprocessRunner`: runs argv as a local subprocess in the container's
  scratch working directory with the container's environment (never the sim's own),
  in its own process group, which is killed when the stream goes away.
- `HandlerRegistry`: Python handlers registered per (namespace, pod,
  container), answering a whole `ExecReply` or writing frames themselves (a
  `StreamHandler`), falling back to another runner (by default a
  `SubprocessRunner`) for everything not registered.

Invariants: a runner never writes to a stream after `run` returns; exit
codes are 0..255 (a process killed by signal N reports 128+N, as runc does).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

__all__ = [
    "ContainerRuntimeError",
    "ExecHandler",
    "ExecIO",
    "ExecReply",
    "ExecRequest",
    "ExecRunner",
    "ExecTarget",
    "HandlerRegistry",
    "StreamHandler",
    "SubprocessRunner",
]

# The PATH an OCI image without its own PATH gets (runc/containerd default).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_CHUNK = 32 * 1024  # io.Copy's buffer size in the kubelet's streaming server


@dataclass(frozen=True, slots=True)
class ExecTarget:
    """The container an exec runs in, as the simulated kubelet knows it."""

    namespace: str
    pod: str
    pod_uid: str
    container: str
    env: Mapping[str, str]
    workdir: Path
    # False when the kubelet has no running container of that name: the exec
    # then fails the way a kubelet fails it (`container not found ("name")`).
    running: bool = True


@dataclass(frozen=True, slots=True)
class ExecRequest:
    target: ExecTarget
    command: tuple[str, ...]
    stdin: bool = False
    tty: bool = False


@dataclass(frozen=True, slots=True)
class ExecReply:
    """What a Python handler answers: the whole output at once."""

    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""


class ExecIO(Protocol):
    """The process's view of the streams (channels 0, 1, 2)."""

    async def write_stdout(self, data: bytes) -> None: ...

    async def write_stderr(self, data: bytes) -> None: ...

    async def read_stdin(self) -> bytes | None:
        """The next chunk of stdin, or None at EOF (or when stdin is not open)."""
        ...


class ExecRunner(Protocol):
    async def run(self, request: ExecRequest, io: ExecIO) -> int:
        """Run the command; return its exit code or raise ContainerRuntimeError."""
        ...


ExecHandler = Callable[[ExecRequest], Awaitable[ExecReply]]
# A handler that writes the streams itself (each write is one WebSocket frame) and
# returns the exit code: for tests that need exact frames or a command that waits.
StreamHandler = Callable[[ExecRequest, ExecIO], Awaitable[int]]


class ContainerRuntimeError(Exception):
    """The runtime could not run the command (not a non-zero exit).

    `str(err)` is the runtime's error as containerd words it, e.g.
    `failed to exec in container: failed to start exec "…": OCI runtime exec
    failed: exec failed: unable to start container process: exec: "ps":
    executable file not found in $PATH: unknown`.
    """


def _oci_start_error(argv0: str, exc: OSError) -> ContainerRuntimeError:
    # runc resolves argv[0] with Go's exec.LookPath; containerd wraps the
    # error with the exec id. Messages follow those Go errors.
    if isinstance(exc, PermissionError):
        reason = f'exec: "{argv0}": permission denied'
    elif "/" in argv0:
        reason = f'exec: "{argv0}": stat {argv0}: no such file or directory'
    else:
        reason = f'exec: "{argv0}": executable file not found in $PATH'
    exec_id = secrets.token_hex(32)
    return ContainerRuntimeError(
        f'failed to exec in container: failed to start exec "{exec_id}": '
        f"OCI runtime exec failed: exec failed: unable to start container process: "
        f"{reason}: unknown"
    )


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode & 0xFF


class SubprocessRunner:
    """Runs argv as a local process in the container's scratch working directory (on the host, no isolation)."""

    def __init__(self, *, default_path: str = DEFAULT_PATH) -> None:
        self._default_path = default_path

    def __repr__(self) -> str:
        return f"SubprocessRunner(default_path={self._default_path!r})"

    async def run(self, request: ExecRequest, io: ExecIO) -> int:
        target = request.target
        if not request.command:
            raise _oci_start_error("", FileNotFoundError())
        env = dict(target.env)
        env.setdefault("PATH", self._default_path)
        target.workdir.mkdir(parents=True, exist_ok=True)
        try:
            proc = await asyncio.create_subprocess_exec(
                *request.command,
                stdin=asyncio.subprocess.PIPE if request.stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                # With a TTY both streams go to the terminal, i.e. to stdout.
                stderr=asyncio.subprocess.STDOUT if request.tty else asyncio.subprocess.PIPE,
                cwd=target.workdir,
                env=env,
                start_new_session=True,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            raise _oci_start_error(request.command[0], exc) from exc
        try:
            return await self._stream(proc, io)
        except ExceptionGroup as failed:
            # A stream write failed (the client left, or a fault broke the
            # stream): surface that error itself, as a handler would raise it.
            raise failed.exceptions[0] from None
        finally:
            await _kill_group(proc)

    @staticmethod
    async def _stream(proc: asyncio.subprocess.Process, io: ExecIO) -> int:
        """Copy the process's streams until it exits and its pipes are drained."""
        async with asyncio.TaskGroup() as group:
            assert proc.stdout is not None
            group.create_task(_pump_out(proc.stdout, io.write_stdout))
            if proc.stderr is not None:
                group.create_task(_pump_out(proc.stderr, io.write_stderr))
            feeder = None
            if proc.stdin is not None:
                feeder = group.create_task(_pump_in(io, proc.stdin))
            returncode = await proc.wait()
            if feeder is not None:
                feeder.cancel()  # the client may never close stdin
            # Children left in the exec's session would hold the pipes open.
            _signal_group(proc)
        return _exit_code(returncode)


async def _pump_out(
    stream: asyncio.StreamReader, write: Callable[[bytes], Awaitable[None]]
) -> None:
    while chunk := await stream.read(_CHUNK):
        await write(chunk)


async def _pump_in(io: ExecIO, stdin: asyncio.StreamWriter) -> None:
    try:
        while (chunk := await io.read_stdin()) is not None:
            stdin.write(chunk)
            await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        return  # the process closed its stdin or exited; the rest is dropped
    finally:
        with contextlib.suppress(OSError):
            stdin.close()


def _signal_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """Kill what is left of the exec's process group, drain its pipes, reap it.

    The pipes must be read to EOF: asyncio's `Process.wait()` only returns once
    they are closed, and a pipe whose reader was paused (a full buffer nobody
    reads after the stream went away) is never seen closing otherwise.
    """
    _signal_group(proc)
    cleanup = asyncio.ensure_future(
        asyncio.gather(_discard(proc.stdout), _discard(proc.stderr), proc.wait())
    )
    try:
        await asyncio.shield(cleanup)
    except asyncio.CancelledError:
        await cleanup  # bounded: the group was SIGKILLed, its pipes are closing
        raise


async def _discard(stream: asyncio.StreamReader | None) -> None:
    if stream is not None:
        while await stream.read(_CHUNK):
            pass


@dataclass(slots=True)
class HandlerRegistry:
    """Python exec handlers per container; anything unregistered goes to `fallback`.

    A handler receives the `ExecRequest` and answers an `ExecReply`; stdin is
    not offered to handlers (nothing probemarker runs reads it). With a TTY the
    handler's stderr goes to stdout, as a terminal merges them.
    """

    fallback: ExecRunner = field(default_factory=SubprocessRunner)
    _handlers: dict[tuple[str, str, str], ExecHandler] = field(
        default_factory=dict, init=False, repr=False
    )
    _streams: dict[tuple[str, str, str], StreamHandler] = field(
        default_factory=dict, init=False, repr=False
    )

    def register(self, namespace: str, pod: str, container: str, handler: ExecHandler) -> None:
        self.unregister(namespace, pod, container)
        self._handlers[(namespace, pod, container)] = handler

    def register_stream(
        self, namespace: str, pod: str, container: str, handler: StreamHandler
    ) -> None:
        """Register a handler that writes to the streams itself (see `StreamHandler`)."""
        self.unregister(namespace, pod, container)
        self._streams[(namespace, pod, container)] = handler

    def unregister(self, namespace: str, pod: str, container: str) -> None:
        self._handlers.pop((namespace, pod, container), None)
        self._streams.pop((namespace, pod, container), None)

    def handler_for(self, target: ExecTarget) -> ExecHandler | None:
        return self._handlers.get((target.namespace, target.pod, target.container))

    async def run(self, request: ExecRequest, io: ExecIO) -> int:
        target = request.target
        stream = self._streams.get((target.namespace, target.pod, target.container))
        if stream is not None:
            return await stream(request, io) & 0xFF
        handler = self.handler_for(target)
        if handler is None:
            return await self.fallback.run(request, io)
        reply = await handler(request)
        # In frames of at most 32 KiB, as the kubelet's io.Copy sends a process's output
        # (a 10 MB reply in one frame would exceed any client's message size limit).
        for start in range(0, len(reply.stdout), _CHUNK):
            await io.write_stdout(reply.stdout[start : start + _CHUNK])
        write_stderr = io.write_stdout if request.tty else io.write_stderr
        for start in range(0, len(reply.stderr), _CHUNK):
            await write_stderr(reply.stderr[start : start + _CHUNK])
        return reply.exit_code & 0xFF
