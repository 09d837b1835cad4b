"""An open WebSocket to the API server, as `pods/exec` reads and writes it.

Stage: inside `probemarker.kube.connect`, opened by `KubeClient.websocket` (client.py)
and used by the `pods/exec` stream (`probe/execstream.py`). Input: aiohttp's client WebSocket. Output: data messages
(`WsMessage`) and how the connection ended (`WsClose`), never aiohttp's types or
exceptions (those go through sessions.py's `mapped`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import aiohttp

from probemarker.kube.connect.errors import RequestInfo
from probemarker.kube.connect.sessions import mapped

__all__ = ["WebSocket", "WsClose", "WsMessage"]


@dataclass(frozen=True, slots=True)
class WsMessage:
    data: bytes
    text: bool


@dataclass(frozen=True, slots=True)
class WsClose:
    """The end of a WebSocket: the server's close frame, or the connection dropped."""

    code: int | None
    abnormal: bool
    detail: str = ""


class WebSocket:
    """An open WebSocket to the API server (see `KubeClient.websocket`)."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, info: RequestInfo) -> None:
        self._ws = ws
        self._info = info
        self.protocol: str | None = ws.protocol

    async def receive(self) -> WsMessage | WsClose:
        """The next data message, or how the connection ended; never raises on a close."""
        with mapped(self._info):
            msg = await self._ws.receive()
        if msg.type is aiohttp.WSMsgType.BINARY:
            return WsMessage(msg.data, text=False)
        if msg.type is aiohttp.WSMsgType.TEXT:
            return WsMessage(msg.data.encode(), text=True)
        if msg.type is aiohttp.WSMsgType.CLOSE:
            return WsClose(code=int(msg.data), abnormal=False, detail=str(msg.extra or ""))
        detail = str(msg.data) if msg.type is aiohttp.WSMsgType.ERROR else "connection closed"
        code = self._ws.close_code
        # CLOSED after a close frame we already returned is a normal end too.
        abnormal = code in (None, aiohttp.WSCloseCode.ABNORMAL_CLOSURE)
        return WsClose(code=1006 if abnormal else code, abnormal=abnormal, detail=detail)

    async def send_bytes(self, data: bytes) -> None:
        with mapped(self._info):
            await self._ws.send_bytes(data)

    async def close(self) -> None:
        """Send a close frame and wait (bounded) for the server's; never raises."""
        with contextlib.suppress(aiohttp.ClientError, OSError, RuntimeError):
            await self._ws.close()

    def abort(self) -> None:
        """Drop the TCP connection now (the server sees the client gone and stops)."""
        # aiohttp has no public abort for a client WebSocket; closing its response
        # closes the underlying connection without a close frame.
        self._ws._response.close()

    def __repr__(self) -> str:
        return f"WebSocket({self._info}, protocol={self.protocol!r}, closed={self._ws.closed})"
