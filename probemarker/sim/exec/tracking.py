"""The exec sessions a server has open, so that it can end them and tests can await them.

Stage: owned by the sim's HTTP layer (`ApiServer.exec_sessions`); `serve_exec` adds
each WebSocket once upgraded and discards it when the session has ended: after
its command ended (a command outlives its client, as on a real cluster) and was
reaped.

Invariants: `wait_idle()` returns only when no session is open; `close_all()`
cancels every session's command and closes its WebSocket with 1001 (going away),
as a real API server drops its connections when it stops (the sim's commands are
its own host processes: they must not outlive it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import WSCloseCode, web

__all__ = ["ExecSessions"]


class ExecSessions:
    """The exec WebSockets still open, so that a server going down can end them.

    aiohttp waits for running handlers when it shuts down (up to its shutdown
    timeout), and an exec lasts as long as its command: call `close_all` from
    the app's `on_shutdown`, as a real API server drops its connections.
    """

    def __init__(self) -> None:
        self._open: dict[web.WebSocketResponse, Callable[[], None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    def __len__(self) -> int:
        return len(self._open)

    def __repr__(self) -> str:
        return f"ExecSessions(open={len(self._open)})"

    def add(self, ws: web.WebSocketResponse, *, stop: Callable[[], None] = lambda: None) -> None:
        """Track `ws`; `stop` cancels its command when the server goes away."""
        self._open[ws] = stop
        self._idle.clear()

    def discard(self, ws: web.WebSocketResponse) -> None:
        self._open.pop(ws, None)
        if not self._open:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Wait until no session is open: every command has ended and been reaped
        (a session is discarded only after its runner's cleanup has finished)."""
        await self._idle.wait()

    async def close_all(self) -> int:
        """Close every open session (1001 going away); their commands are cancelled."""
        sockets = list(self._open)
        for stop in list(self._open.values()):
            stop()
        await asyncio.gather(
            *(ws.close(code=WSCloseCode.GOING_AWAY) for ws in sockets), return_exceptions=True
        )
        return len(sockets)
