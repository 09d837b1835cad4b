"""The health and metrics server's accept loop: its own, so that it can say no.

Stage: edge (input). Input: a listening socket, the protocol factory of the HTTP
server (aiohttp's), the `ConnectionGate`. Output: each accepted connection handed to
the HTTP server, wrapped so that its end is counted and its lifetime bounded, and
the older connection the gate chose to make room for it closed.

Why not asyncio's own server loop (`loop.create_server`, which aiohttp's sites use):
it accepts whatever arrives, up to its backlog per wake-up, with no say in who stays;
and when the process is out of descriptors it logs every failed `accept()` with a
traceback through the loop's exception handler, a hundred at a wake-up (issue 22:
97,000 lines in 10 s). Here:

- an `accept()` failure for want of a resource (EMFILE, ENFILE, ENOBUFS, ENOMEM) is
  counted by errno (`ServerStats.accept_errors`), logged at most once a minute per
  errno with the number held back (`Repeats`; no traceback: the errno says it all),
  and retried after `retry` seconds (asyncio waits 1 s too), so a process out of
  descriptors neither spins nor floods its log; the first accept that works again
  logs one line and clears the count;
- any other accept failure is logged the same way and retried, never fatal;
- when the `ConnectionGate` chooses an older connection to make room for a new one,
  it is aborted at once (connections.py says which and why);
- a connection is closed, whatever it is doing, `lifetime` seconds after it was
  accepted (`ServerStats.expired`): one that reads its answer too slowly, or keeps
  asking, cannot hold its place for ever. aiohttp's own keep-alive timer (serve.py)
  closes one that sends no complete request much sooner.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Callable
from typing import Any, Final

import structlog

from probemarker.kit.clock import Clock
from probemarker.kit.repeats import Repeats
from probemarker.observe.connections import ConnectionGate, peer_of

__all__ = ["AcceptLoop", "errno_name"]

log = structlog.get_logger(__name__)

# accept() failures of one connection only, the next accept() is fine: a connection
# reset before it was taken, a firewall's refusal, and the network errors Linux passes
# on from the new socket, which accept(2) says to treat like EAGAIN.
_ONE_CONNECTION: Final = frozenset(
    getattr(errno, name)
    for name in (
        "ECONNABORTED", "EPERM", "ENETDOWN", "EPROTO", "ENOPROTOOPT", "EHOSTDOWN",
        "ENONET", "EHOSTUNREACH", "EOPNOTSUPP", "ENETUNREACH",
    )
    if hasattr(errno, name)
)  # fmt: skip
# The rest are waited out and retried (EMFILE, ENFILE, ENOBUFS, ENOMEM: the list
# asyncio's BaseSelectorEventLoop._accept_connection waits out, 1 s, as here).
_HINTS: Final = {
    errno.EMFILE: "the process is out of file descriptors (process_open_fds reaches "
    "process_max_fds); see docs/operations.md, 'Out of file descriptors'",
    errno.ENFILE: "the node is out of file descriptors (fs.file-max)",
}


def errno_name(err: OSError) -> str:
    """`EMFILE` for errno 24; the exception's class name when there is no errno."""
    if err.errno is None:
        return type(err).__name__
    return errno.errorcode.get(err.errno, str(err.errno))


class _Tracked(asyncio.Protocol):
    """The HTTP server's protocol for one connection, with its end reported once
    (`on_end(self)`) and its lifetime bounded. Everything else is passed through."""

    def __init__(
        self,
        inner: asyncio.Protocol,
        *,
        on_end: Callable[[_Tracked], None],
        lifetime: float,
        on_expiry: Callable[[], None],
    ) -> None:
        self._inner = inner
        self._on_end: Callable[[_Tracked], None] | None = on_end
        self._on_expiry = on_expiry
        self._lifetime = lifetime
        self._expiry: asyncio.TimerHandle | None = None
        self._transport: asyncio.Transport | None = None
        self._aborted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._expiry = asyncio.get_running_loop().call_later(self._lifetime, self._expire)
        self._inner.connection_made(transport)
        if self._aborted:  # chosen to make room before it was even connected
            transport.abort()

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            self._inner.connection_lost(exc)
        finally:
            self.end()

    def end(self) -> None:
        """The connection is over (idempotent): the gate gets its place back."""
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        on_end, self._on_end = self._on_end, None
        if on_end is not None:
            on_end(self)

    def abort(self) -> None:
        """Close it now, unread answer or not (it makes room for a newer one)."""
        self._aborted = True
        if self._transport is not None:
            # abort, not close: close() would wait for a reader that does not read
            self._transport.abort()

    def _expire(self) -> None:
        """Its lifetime is over and it has not ended: closing or not (a close waits for
        its answer to be read, which a reader that does not read never lets happen)."""
        self._expiry = None
        if self._transport is not None:
            self._on_expiry()
            self._transport.abort()


class AcceptLoop:
    """Accepts on listening sockets until cancelled; see the module docstring."""

    def __init__(
        self,
        *,
        factory: Callable[[], asyncio.Protocol],
        gate: ConnectionGate,
        clock: Clock,
        repeats: Repeats,
        lifetime: float,
        retry: float = 1.0,
    ) -> None:
        self._factory = factory
        self._gate = gate
        self._clock = clock
        self._repeats = repeats
        self._lifetime = lifetime
        self._retry = retry
        self._failing: dict[str, int] = {}  # errno name -> failures since the last accept

    def __repr__(self) -> str:
        return f"AcceptLoop({self._gate!r}, lifetime={self._lifetime:g})"

    async def serve(self, sock: socket.socket) -> None:
        """Accept on `sock` (listening, non-blocking) until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, address = await loop.sock_accept(sock)
            except OSError as err:
                if err.errno in _ONE_CONNECTION:
                    continue
                self._failed(err)
                await self._clock.sleep(self._retry)
                continue
            self._recovered()
            await self._take(conn, address)

    async def _take(self, conn: socket.socket, address: Any) -> None:
        stats = self._gate.stats

        def expired() -> None:
            stats.expired += 1

        tracked = _Tracked(
            self._factory(), on_end=self._gate.release, lifetime=self._lifetime, on_expiry=expired
        )
        victim = self._gate.admit(tracked, peer_of(address))
        if isinstance(victim, _Tracked):
            victim.abort()  # the oldest makes room (connections.py says why)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(lambda: tracked, conn)
        except OSError as err:  # this connection only: the loop goes on
            conn.close()
            tracked.end()
            self._failed(err)
        except BaseException:
            conn.close()
            tracked.end()
            raise

    def _failed(self, err: OSError) -> None:
        name = errno_name(err)
        self._gate.stats.accept_errors[name] += 1
        self._failing[name] = self._failing.get(name, 0) + 1
        held = self._repeats.fields(("accept", name), self._clock.now())
        if held is None:
            return
        log.warning(
            "metrics.accept_failed",
            error=name,
            message=err.strerror or str(err),
            retry_in=self._retry,
            hint=_HINTS.get(err.errno or 0, "retrying"),
            **held,
        )

    def _recovered(self) -> None:
        if not self._failing:
            return
        failures, self._failing = self._failing, {}
        for name in failures:
            self._repeats.clear(("accept", name))
        log.info("metrics.accepting_again", failures=failures)
