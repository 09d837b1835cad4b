"""The one HTTP edge of the daemon: requests, streams and WebSockets to the API server.

Stage: below every other module of `probemarker.kube`. Input: a `Connection`
(config.py). Output: parsed JSON answers, the lines of a streaming answer, and
WebSocket connections (websocket.py); failures as the error tree of errors.py.

- Three connection pools (sessions.py: an aiohttp session each, one SSL context
  between them, which resumes TLS sessions (tlsresume.py) unless switched off), so a
  connection held for long never keeps a short request waiting: plain requests
  (LISTs, GETs, status patches, events; `request_connections`), watch streams (one
  held per informer scope for minutes; no limit), exec WebSockets (one held per exec
  run; `exec_connections`, sized by the owner to its cap on probe runs).
- Every call has a deadline: `request_timeout` for a whole request, a read
  deadline for streams (no byte for `read_timeout` seconds is a dead
  connection), the handshake `timeout` for WebSockets. Nothing waits forever on
  a silent socket.
- A 401 makes the credentials refresh once (a rotated token file is re-read)
  and the request is sent again; a second 401 is `ApiUnauthorized`.
- aiohttp's exceptions end in sessions.py (`mapped`); error statuses go through
  `error_from_response`.

Where this departs from kubernetes_asyncio's `ApiClient`: no generated models
(JSON is parsed once with orjson into dicts the caller projects; a LIST item by item
as it arrives, `list_page` (streams.py), so a big answer is never held whole), one
deadline per call instead of none by default, a line splitter for watches without
aiohttp's 128 KiB line limit (streams.py), and a single error tree instead of
`ApiException`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import aiohttp
import yarl

from probemarker import __version__
from probemarker.kube.connect.config import Connection
from probemarker.kube.connect.errors import (
    ApiError,
    ApiUnauthorized,
    ApiUnreachable,
    KubeError,
    RequestInfo,
    error_from_response,
    loads_object,
)
from probemarker.kube.connect.sessions import (
    MAX_ERROR_BODY,
    Pools,
    kept_refusal,
    mapped,
    smaller_tls_read_buffers,
)
from probemarker.kube.connect.streams import lines, read_list
from probemarker.kube.connect.tlsresume import ResumingSSLContext, SessionCache
from probemarker.kube.connect.websocket import WebSocket

__all__ = ["ClientSettings", "KubeClient", "Params", "RawAnswer"]

_T = TypeVar("_T")

Params = Mapping[str, str] | Sequence[tuple[str, str]] | None

_JSON = {"Accept": "application/json"}


@dataclass(frozen=True, slots=True)
class ClientSettings:
    request_timeout: float = 30.0  # a whole plain request, answer included
    connect_timeout: float = 10.0  # TCP + TLS for any connection
    ws_close_timeout: float = 2.0  # waiting for the server's close frame
    # Plain requests only: each holds its connection for one answer, so a request waits
    # at most behind other short requests, never behind a watch or an exec.
    request_connections: int = 32
    # Exec WebSockets, one held per running exec: the daemon sets this to its cap on probe
    # runs, so a running probe never waits for a connection (daemon.assembly.client_settings).
    exec_connections: int = 64
    keepalive_timeout: float = 60.0
    max_line_bytes: int = 16 << 20  # a watch line (one object; etcd caps at 1.5 MiB)
    # One WebSocket message: the kubelet and the API server send frames of 32 KiB at most;
    # a bigger one ends the connection instead of growing our memory.
    ws_max_message_bytes: int = 4 << 20
    tls_resumption: bool = True
    tls_session_max_age: float = 600.0
    user_agent: str = f"probemarker/{__version__}"


@dataclass(frozen=True, slots=True)
class RawAnswer:
    """An answer of `KubeClient.request_raw`: its status, Content-Type and body."""

    status: int
    content_type: str
    body: bytes


class KubeClient:
    """The sessions to one API server; an async context manager."""

    def __init__(self, connection: Connection, *, settings: ClientSettings | None = None):
        self.connection = connection
        self.settings = settings or ClientSettings()
        if self.settings.request_connections < 1 or self.settings.exec_connections < 1:
            raise ValueError("request_connections and exec_connections must be at least 1")
        self.tls_sessions = SessionCache(max_age=self.settings.tls_session_max_age)
        self._ssl: ssl.SSLContext | None = None
        self._pools: Pools | None = None
        # Answers by (verb, resource as RBAC spells it, HTTP status; 0 = no answer), for
        # the metrics: `pods/status`, `podprobemarkers.probemarker.io`; never a name.
        self.requests: Counter[tuple[str, str, int]] = Counter()

    def __repr__(self) -> str:
        return f"KubeClient({self.connection.server!r})"

    async def __aenter__(self) -> KubeClient:
        if self.connection.https:
            smaller_tls_read_buffers()
        tls = self.connection.tls
        if tls is not None:
            self._ssl = tls.ssl_context(
                resume=self.settings.tls_resumption, cache=self.tls_sessions
            )
        self._pools = Pools(
            requests=self.settings.request_connections,
            watches=0,  # one per informer scope, fixed by the configuration: no limit
            execs=self.settings.exec_connections,
            ssl=self._ssl if self._ssl is not None else False,
            keepalive=self.settings.keepalive_timeout,
            user_agent=self.settings.user_agent,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._pools is not None:
            pools, self._pools = self._pools, None
            await pools.close()

    # -- internals ---------------------------------------------------------------------

    @property
    def _open_pools(self) -> Pools:
        if self._pools is None:
            raise RuntimeError("KubeClient is not open: use `async with KubeClient(...)`")
        return self._pools

    def _url(self, path: str) -> str:
        return self.connection.server + path

    def _forget_tls(self) -> None:
        if isinstance(self._ssl, ResumingSSLContext):
            host = self.connection.tls.server_name if self.connection.tls else None
            self._ssl.forget(host or (yarl.URL(self.connection.server).host or ""))

    @contextlib.contextmanager
    def _counted(self, info: RequestInfo) -> Iterator[None]:
        """Count a request that got no answer (its HTTP status is counted by the caller)."""
        try:
            yield
        except ApiError as err:
            self.requests[(info.verb, info.full_resource, err.code)] += 1
            raise
        except KubeError:
            self.requests[(info.verb, info.full_resource, 0)] += 1
            raise

    async def _headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        auth = await self.connection.credentials.authorization()
        if auth:
            headers["Authorization"] = auth
        return headers

    def _server_hostname(self) -> dict[str, Any]:
        tls = self.connection.tls
        return {"server_hostname": tls.server_name} if tls and tls.server_name else {}

    async def _reauthorized(self, attempt: Callable[[], Awaitable[_T]]) -> _T:
        """Run `attempt`; after a 401, refresh the credentials and run it once more."""
        try:
            return await attempt()
        except ApiUnauthorized:
            await self.connection.credentials.refresh()
        return await attempt()

    async def _send(
        self,
        session: aiohttp.ClientSession,
        method: str,
        path: str,
        *,
        info: RequestInfo,
        params: Params,
        body: bytes | None,
        headers: Mapping[str, str],
        limits: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        """Send (again after a 401, see `_reauthorized`); an error status raises its error."""

        async def attempt() -> aiohttp.ClientResponse:
            with self._counted(info), mapped(info, self._forget_tls):
                response = await session.request(
                    method,
                    self._url(path),
                    params=params,
                    data=body,
                    headers=await self._headers(headers),
                    timeout=limits,
                    allow_redirects=False,
                    **self._server_hostname(),
                )
            self.requests[(info.verb, info.full_resource, response.status)] += 1
            if response.status >= 400:
                raise await self._error_of(response, info)
            return response

        return await self._reauthorized(attempt)

    async def _error_of(self, response: aiohttp.ClientResponse, info: RequestInfo) -> ApiError:
        try:
            with mapped(info):
                body = await response.content.read(MAX_ERROR_BODY)
        except ApiUnreachable:
            body = b""
        finally:
            response.close()
        return error_from_response(response.status, body, response.headers, info)

    def _limits(self, wait: float | None) -> aiohttp.ClientTimeout:
        """A plain request's deadlines: `wait` seconds for it all (default
        `settings.request_timeout`), `settings.connect_timeout` to connect."""
        return aiohttp.ClientTimeout(
            total=wait if wait is not None else self.settings.request_timeout,
            connect=self.settings.connect_timeout,
        )

    async def _get(
        self,
        session: aiohttp.ClientSession,
        path: str,
        *,
        info: RequestInfo,
        params: Params,
        limits: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        """GET a JSON answer whose body the caller reads as it arrives (a LIST, a watch)."""
        return await self._send(
            session, "GET", path, info=info, params=params, body=None, headers=_JSON, limits=limits
        )

    # -- plain requests ----------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        info: RequestInfo,
        params: Params = None,
        body: bytes | None = None,
        content_type: str | None = None,
        wait: float | None = None,
    ) -> dict[str, Any]:
        """Send a request and return its JSON answer (a dict); errors as the error tree.

        `wait`: seconds for the whole request (default `settings.request_timeout`).
        """
        headers = dict(_JSON)
        if content_type is not None:
            headers["Content-Type"] = content_type
        response = await self._send(
            self._open_pools.requests,
            method,
            path,
            info=info,
            params=params,
            body=body,
            headers=headers,
            limits=self._limits(wait),
        )
        try:
            with mapped(info):
                raw = await response.read()
        finally:
            response.release()
        return loads_object(raw, what="the answer", request=info)

    async def request_raw(
        self,
        method: str,
        path: str,
        *,
        info: RequestInfo,
        params: Params = None,
        wait: float | None = None,
        limit: int = MAX_ERROR_BODY,
    ) -> RawAnswer:
        """Send a request and return its answer as it is, whatever its status: for
        `pods/proxy`, whose answer is the pod's own (its 500 is not the API server's).
        Only what got no answer raises (`ApiUnreachable`, `ApiTimeout`); the body is
        read up to `limit` bytes. No retry after a 401: the caller tells whose it is."""
        session = self._open_pools.requests
        with self._counted(info), mapped(info, self._forget_tls):
            async with session.request(
                method,
                self._url(path),
                params=params,
                headers=await self._headers({"Accept": "*/*"}),
                timeout=self._limits(wait),
                allow_redirects=False,
                **self._server_hostname(),
            ) as response:
                self.requests[(info.verb, info.full_resource, response.status)] += 1
                body = bytearray()
                while len(body) < limit and (
                    chunk := await response.content.read(limit - len(body))
                ):
                    body += chunk
                return RawAnswer(
                    response.status, response.headers.get("Content-Type", ""), bytes(body)
                )

    async def list_page(
        self,
        path: str,
        *,
        info: RequestInfo,
        item: Callable[[dict[str, Any]], None],
        params: Params = None,
        wait: float | None = None,
    ) -> dict[str, Any]:
        """GET a list and hand each of its items to `item` as soon as it has arrived
        (streams.py, listbody.py), so the answer is never held whole; return the answer
        without its items (`metadata`: resourceVersion, continue). An exception of
        `item` propagates (the connection is closed, not reused).

        `wait`: seconds for the whole request (default `settings.request_timeout`).
        """
        pool = self._open_pools.requests
        response = await self._get(pool, path, info=info, params=params, limits=self._limits(wait))
        return await read_list(
            response, info, item=item, max_item_bytes=self.settings.max_line_bytes
        )

    # -- streams -----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def stream_lines(
        self,
        path: str,
        *,
        info: RequestInfo,
        params: Params = None,
        read_timeout: float,
        connect_timeout: float | None = None,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """GET a streaming answer (a watch) and yield an iterator of its lines.

        No byte for `read_timeout` seconds raises `ApiTimeout` from the iterator (a
        half-open connection); an error status raises before anything is yielded.
        """
        limits = aiohttp.ClientTimeout(
            total=None,
            connect=connect_timeout or self.settings.connect_timeout,
            sock_read=read_timeout,
        )
        pool = self._open_pools.watches
        response = await self._get(pool, path, info=info, params=params, limits=limits)
        try:
            yield lines(response, info, limit=self.settings.max_line_bytes)
        finally:
            # Never hand a half-read stream back to the pool.
            response.close()

    # -- WebSockets --------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def websocket(
        self,
        path: str,
        *,
        info: RequestInfo,
        params: Sequence[tuple[str, str]],
        protocols: Sequence[str],
        wait: float,
    ) -> AsyncIterator[WebSocket]:
        """Open a WebSocket (handshake within `wait` seconds), yield it, close it on exit."""
        ws = await self._reauthorized(
            lambda: self._ws_connect(path, info=info, params=params, protocols=protocols, wait=wait)
        )
        socket = WebSocket(ws, info)
        try:
            yield socket
        finally:
            await socket.close()

    async def _ws_connect(
        self,
        path: str,
        *,
        info: RequestInfo,
        params: Sequence[tuple[str, str]],
        protocols: Sequence[str],
        wait: float,
    ) -> aiohttp.ClientWebSocketResponse:
        """One upgrade attempt; a refusal raises the error of its status and Status body."""
        with (
            kept_refusal() as refusal,
            self._counted(info),
            mapped(info, self._forget_tls, refusal),
        ):
            async with asyncio.timeout(wait):
                ws: aiohttp.ClientWebSocketResponse = await self._open_pools.execs.ws_connect(
                    self._url(path),
                    params=params,
                    protocols=tuple(protocols),
                    headers=await self._headers(),
                    timeout=aiohttp.ClientWSTimeout(
                        ws_receive=None, ws_close=self.settings.ws_close_timeout
                    ),
                    autoclose=True,
                    autoping=True,
                    compress=0,
                    max_msg_size=self.settings.ws_max_message_bytes,
                    **self._server_hostname(),
                )
        self.requests[(info.verb, info.full_resource, 101)] += 1
        return ws
