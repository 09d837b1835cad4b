"""The aiohttp sessions under `KubeClient`, and the one place aiohttp's exceptions end.

Stage: below client.py, inside `probemarker.kube.connect`. Input: the pools' sizes,
the SSL context, the keep-alive and the User-Agent (`Pools`); a request's
`RequestInfo` (`mapped`). Output: three open sessions; failures as the error tree of
errors.py.

- Three connection pools (an aiohttp session each, one SSL context between them), so
  a connection held for long never keeps a short request waiting: plain requests,
  watch streams, exec WebSockets (client.py's docstring says who holds what).
- A TLS connection's read buffer is 64 KiB, not asyncio's 256 KiB
  (`smaller_tls_read_buffers`, process-wide), as the daemon holds up to a hundred.
- A refused WebSocket upgrade keeps its body (`kept_refusal`): the Status that says
  why, which aiohttp would close unread.
- This is the only module that sees aiohttp's exceptions: `mapped` turns them into
  `ApiUnreachable`/`ApiTimeout`, and error statuses go through `error_from_response`.
"""

from __future__ import annotations

import asyncio.sslproto
import contextlib
import ssl
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any

import aiohttp

from probemarker.kube.connect.errors import (
    ApiTimeout,
    ApiUnreachable,
    KubeError,
    RequestInfo,
    error_from_response,
)

__all__ = ["MAX_ERROR_BODY", "Pools", "kept_refusal", "mapped", "smaller_tls_read_buffers"]

MAX_ERROR_BODY = 64 << 10  # an error answer is a Status; never read a huge one whole

# asyncio's TLS transport (`asyncio.sslproto.SSLProtocol`, CPython 3.11 to 3.13) gives
# every TLS connection a read buffer of `max_size`, 256 KiB, zero-filled when the
# connection is made however little it reads (python/cpython#109534). The daemon makes
# one TLS connection per exec run (up to --max-concurrent-probes at once) and keeps up
# to `request_connections` plain ones and one per watch: on a busy node a hundred, 25
# MiB of zeroes, the biggest part of its peak on a node of 500 pods (issue 22). 64 KiB
# still takes four full TLS records (16 KiB each) per read.
_TLS_READ_BUFFER = 64 << 10


def smaller_tls_read_buffers() -> None:
    """Lower asyncio's per-connection TLS read buffer to `_TLS_READ_BUFFER` (for the
    whole process: the class attribute is the only handle asyncio gives)."""
    protocol = getattr(asyncio.sslproto, "SSLProtocol", None)
    if protocol is not None and getattr(protocol, "max_size", 0) > _TLS_READ_BUFFER:
        protocol.max_size = _TLS_READ_BUFFER


# aiohttp's `ws_connect` raises WSServerHandshakeError for a refused upgrade and closes
# the answer unread, losing the Status that says why (`pods "x" not found`, the kubelet's
# `container not found ("app")`). `_Response` reads that body while the answer is still
# open, into the list this variable holds for the duration of a `kept_refusal()` block.
_HANDSHAKE_BODY: ContextVar[list[bytes] | None] = ContextVar("_HANDSHAKE_BODY", default=None)


@contextlib.contextmanager
def kept_refusal() -> Iterator[list[bytes]]:
    """A list that receives the body of a refused WebSocket upgrade made in the block."""
    refusal: list[bytes] = []
    token = _HANDSHAKE_BODY.set(refusal)
    try:
        yield refusal
    finally:
        _HANDSHAKE_BODY.reset(token)


class _Response(aiohttp.ClientResponse):
    """aiohttp's response, keeping the body of a refused WebSocket upgrade."""

    async def start(self, connection: Any) -> aiohttp.ClientResponse:
        response = await super().start(connection)
        sink = _HANDSHAKE_BODY.get()
        if sink is not None and self.status >= 400:
            body = bytearray()
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                while len(body) < MAX_ERROR_BODY and (chunk := await self.content.readany()):
                    body += chunk
            sink.append(bytes(body[:MAX_ERROR_BODY]))
        return response


@contextlib.contextmanager
def mapped(info: RequestInfo, forget_tls: Any = None, body: Sequence[bytes] = ()) -> Iterator[None]:
    """Turn aiohttp's and the socket's exceptions into the error tree (the only place)."""
    try:
        yield
    except KubeError:
        raise
    except (TimeoutError, aiohttp.ServerTimeoutError) as err:
        raise ApiTimeout(f"no answer in time ({type(err).__name__})", request=info) from err
    except aiohttp.WSServerHandshakeError as err:
        raw = body[-1] if body else b""
        raise error_from_response(err.status, raw, err.headers or {}, info) from err
    except (aiohttp.ClientSSLError, ssl.SSLError) as err:
        if forget_tls is not None:
            forget_tls()
        raise ApiUnreachable(f"TLS failure: {err}", request=info) from err
    except aiohttp.ClientResponseError as err:
        raise error_from_response(err.status, b"", err.headers or {}, info) from err
    except (aiohttp.ClientError, OSError) as err:
        raise ApiUnreachable(f"{type(err).__name__}: {err}", request=info) from err


class Pools:
    """The three sessions, one per kind of connection (see the module docstring)."""

    def __init__(self, *, requests: int, watches: int, execs: int, **common: Any) -> None:
        self.requests = self._open(requests, **common)
        self.watches = self._open(watches, **common)
        self.execs = self._open(execs, **common)

    @staticmethod
    def _open(
        limit: int, *, ssl: ssl.SSLContext | bool, keepalive: float, user_agent: str
    ) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(ssl=ssl, limit=limit, keepalive_timeout=keepalive)
        return aiohttp.ClientSession(
            connector=connector,
            headers={"User-Agent": user_agent},
            skip_auto_headers=("Accept-Encoding",),  # the API server's gzip costs CPU on both sides
            auto_decompress=False,
            response_class=_Response,
        )

    async def close(self) -> None:
        for session in (self.requests, self.watches, self.execs):
            await session.close()
