"""The status socket: what the daemon holds, on a Unix socket inside its own pod.

Stage: observe (I/O: a Unix socket server). Input: one request line per connection,
`{"pod": "NS/NAME" | null, "marker": "NS/NAME" | null, "namespace": "NS" | null}` (an
empty line, or a field left out: everything). Output: one JSON document, the answer
(observe/answer.py), or `{"error": ...}`, then the connection is closed. `probemarker
status --local` is the reader (status/read.py). The filters are applied by the daemon
(engine.inspect reads only the pods asked about), not by the reader.

Why a Unix socket (docs/security.md): the answer is not served to the cluster network
(the metrics port is unchanged); it is read from inside the daemon's container, so
whoever reads it may exec into the daemon's pod, which already lets them read
everything the daemon holds. The socket file is the daemon user's, mode 0600, in a
directory of its own (an emptyDir at /run/probemarker in the DaemonSet).

Cost: the server is one listening socket; nothing is built, kept or counted while
nobody asks. Bounds: a request line of at most `REQUEST_LIMIT` bytes within
`REQUEST_WAIT` seconds, at most `CONNECTIONS` connections at once (more are told the
daemon is busy and closed), `ANSWER_WAIT` seconds to take the answer. Answers are built
one at a time (the build does not await), so what readers at once hold is their
answers' bytes, each within observe/answer.py's budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import stat
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

import orjson
import structlog

from probemarker.api.model import MarkerRef

__all__ = [
    "CONNECTIONS",
    "REQUEST_LIMIT",
    "StatusRequest",
    "StatusSocket",
    "StatusSocketError",
    "parse_request",
]

log = structlog.get_logger(__name__)

REQUEST_LIMIT = 4096  # bytes of the request line
REQUEST_WAIT = 5.0  # seconds for the request line
ANSWER_WAIT = 30.0  # seconds for the reader to take the answer
CONNECTIONS = 4  # at once
BUSY_WAIT = 1.0  # seconds for the request of a reader past CONNECTIONS, told it is busy
BUSY = (
    orjson.dumps(
        {"error": f"busy: {CONNECTIONS} readers at once, the most it serves; try again shortly"}
    )
    + b"\n"
)


@dataclass(frozen=True, slots=True)
class StatusRequest:
    """What a reader asks for: only `pod` (namespace, name), only `marker`'s probes,
    only `namespace`'s pods; None: no such filter."""

    pod: tuple[str, str] | None = None
    marker: MarkerRef | None = None
    namespace: str | None = None


Answer = Callable[[StatusRequest], bytes]


class StatusSocketError(Exception):
    """The socket cannot be served; the message names the flag, the path and the fix."""


class RequestError(ValueError):
    """A request the socket cannot answer; the message says why."""


def _ref(value: object, field: str) -> tuple[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise RequestError(f"{field} must be NAMESPACE/NAME or null")
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise RequestError(f"{field} must be NAMESPACE/NAME, not {value!r}")
    return namespace, name


def _namespace(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or "/" in value:
        raise RequestError(f"namespace must be a namespace's name or null, not {value!r}")
    return value


def parse_request(line: bytes) -> StatusRequest:
    """The request of a request line; RequestError when it is not one."""
    if not line.strip():
        return StatusRequest()
    try:
        body = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise RequestError(f"the request is not JSON: {exc}") from exc
    if not isinstance(body, dict) or set(body) - {"pod", "marker", "namespace"}:
        raise RequestError('the request must be {"pod": ..., "marker": ..., "namespace": ...}')
    marker = _ref(body.get("marker"), "marker")
    return StatusRequest(
        pod=_ref(body.get("pod"), "pod"),
        marker=None if marker is None else MarkerRef(*marker),
        namespace=_namespace(body.get("namespace")),
    )


class StatusSocket:
    """Serves `answer(request)` at `path` while entered (see the module docstring)."""

    def __init__(self, path: str, answer: Answer) -> None:
        self.path = path
        self._answer = answer
        self._server: asyncio.AbstractServer | None = None
        self._open = 0
        self.answered = 0  # for tests and the bench: answers sent

    def __repr__(self) -> str:
        return f"StatusSocket({self.path!r}, answered={self.answered})"

    async def __aenter__(self) -> StatusSocket:
        try:
            listening = _bound(self.path)
            self._server = await asyncio.start_unix_server(
                self._serve, sock=listening, limit=REQUEST_LIMIT
            )
        except OSError as exc:
            raise StatusSocketError(
                f"--status-socket {self.path}: cannot listen: {exc.strerror or exc}; give a "
                "path in a directory the daemon may write (the DaemonSet mounts an emptyDir "
                "at /run/probemarker), or unset it"
            ) from exc
        log.info("status.listening", socket=self.path)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._open >= CONNECTIONS:
            # Said, not just closed: an empty answer would read as a broken daemon.
            # The request is read (for a second at most) before closing: a close with it
            # unread resets the connection, and the reader would lose the answer.
            writer.write(BUSY)
            with contextlib.suppress(OSError, ValueError, TimeoutError):
                await asyncio.wait_for(reader.readline(), BUSY_WAIT)
            writer.close()
            return
        self._open += 1
        try:
            body = await self._respond(reader)
            writer.write(body)
            await asyncio.wait_for(writer.drain(), ANSWER_WAIT)
            self.answered += 1
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the reader went away or never asked: nothing to tell anyone
        finally:
            self._open -= 1
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    async def _respond(self, reader: asyncio.StreamReader) -> bytes:
        try:
            line = await asyncio.wait_for(reader.readline(), REQUEST_WAIT)
            request = parse_request(line)
        except ValueError as exc:  # RequestError, or a line past REQUEST_LIMIT
            return orjson.dumps({"error": str(exc)}) + b"\n"
        return self._answer(request)


def _bound(path: str) -> socket.socket:
    """A Unix socket bound at `path`, made under umask 0177 so that it never exists with
    a wider mode than 0600. The umask is the process's: it is set and restored with no
    await between (asyncio's create_unix_server yields after binding), so no other task
    or thread creates a file under it."""
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        previous = os.umask(0o177)
        try:
            _remove_stale(path)
            listening.bind(path)
        finally:
            os.umask(previous)
    except BaseException:
        listening.close()
        raise
    return listening


def _remove_stale(path: str) -> None:
    """A socket left by a previous daemon in the same directory is removed; anything
    else at `path` is not ours: OSError, so the daemon says so and stops."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(17, "exists and is not a socket (remove it or choose another path)")
    os.unlink(path)
