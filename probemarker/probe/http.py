"""The httpGet probe handler: one GET to the pod IP, judged as the kubelet judges it.

Stage: probe. Input: an `HTTPGetAction`, the `ProbeTarget` and the run's time limit.
Output: an `Outcome`, never an exception but cancellation.

| what happened | outcome | message |
|---|---|---|
| status 200-299 | Succeeded | the body (first 1 KiB) |
| status 300-399, not followed (another host or port, no Location, not 301/302/303/307/308) | Succeeded | "warning: ... not followed ...", then the body |
| status 400 and up, or below 200 | Failed | "HTTP probe failed with statuscode: N", then the body's first line, short |
| refused, reset, bad TLS, not HTTP, a 10th redirect | Failed | what went wrong, naming the address |
| no answer within the time limit (connect, headers and body together) | Failed | "timed out after Ns ..." |
| no pod IP, a port name the container lacks | Unknown | why (the engine reports the port) |
| a request aiohttp will not send (a control character in a header value) | Unknown | why |
| a local shortage (file descriptors, buffers, memory) | Unknown | the error |

The request, as the kubelet makes it (pkg/probe/http): `GET scheme://podIP:port/path`
with the marker's headers; `User-Agent: probemarker/<version>` and `Accept: */*` unless
the marker sets them; no compression, no proxy, no cookies; HTTPS without checking the
certificate. A `Host` header sets the HTTP Host only: the connection still goes to the
pod IP (so a marker cannot make the daemon reach another host, Kruise#2471).

Redirects (301, 302, 303, 307, 308, as Go's client): followed while they stay on the
pod IP and port, 10 requests at most; a user name or password in a Location is
dropped, never sent as credentials nor shown in a message; a redirect
elsewhere is not followed, and its 3xx answer counts as Succeeded with a warning in
the message, as the kubelet's "Probe terminated redirects". A custom Host is kept on a
relative redirect only, as Go's client does.

Connections are pooled per address and reused across runs (keep-alive); a reused
connection the server closed meanwhile is retried once by aiohttp (GET is idempotent).
A response whose body is not read to the end (a large body, a timeout) has its
connection closed, never returned to the pool. The idle ones are bounded, and shared
by namespace (probe/httppool.py): each run tells the pool whose pod its address is.

A failure's message is the kubelet's (pkg/probe/http, DoHTTPProbe: "HTTP probe failed
with statuscode: N", the body left out) and at most the body's first line, cut to
`FAILURE_LINE_LIMIT` bytes and left out when it is markup (`<!DOCTYPE html>`, `<html>`,
`<?xml`: an error page's first line says nothing the status does not). A web server's
error page is kilobytes of HTML: in a condition message it buried the status under
lines of markup. The body itself (cleaned, first 1 KiB) stays in `Outcome.answer`.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

import aiohttp
import anyio
from multidict import CIMultiDict
from yarl import URL

from probemarker import __version__
from probemarker.api.model import Handler, HTTPGetAction, HTTPHeader
from probemarker.probe.handler import OwnsConnections, ProbeTarget
from probemarker.probe.httppool import BoundedConnector, PoolStats
from probemarker.probe.outcome import Outcome
from probemarker.probe.output import MESSAGE_LIMIT, clean_message, first_line
from probemarker.probe.ports import Address, NoAddress, address_of, local_shortage, os_reason

__all__ = [
    "BODY_LIMIT",
    "DEFAULT_MAX_IDLE",
    "FAILURE_LINE_LIMIT",
    "MAX_REDIRECTS",
    "HTTPGetHandler",
    "failure_message",
    "request_url",
]

BODY_LIMIT: Final = MESSAGE_LIMIT  # bytes of the body read and kept
# Bytes of the body's first line a failure's message shows: a status word or a short
# reason ("draining", "db unreachable"), not a page.
FAILURE_LINE_LIMIT: Final = 100
MAX_REDIRECTS: Final = 10  # Go's client stops after 10, and so does the kubelet
# The redirects Go's client follows; any other 3xx is an answer (the kubelet's warning).
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
KEEPALIVE: Final = 20.0  # seconds an idle connection is kept: above the default 10 s period
# Idle connections kept when the caller gives no budget (`probemarker check --direct`).
DEFAULT_MAX_IDLE: Final = 64


_KEEP: Final = "/?#[]@!$&'()*+,;=:%-._~"


def request_url(scheme: str, address: Address, path: str) -> URL:
    """`scheme://address/path`: the path's query is kept, any scheme or host in it is
    ignored (the kubelet's formatURL), and a path without a leading / gets one.
    Raises ValueError for a path that cannot be read as one (never probes another)."""
    # Escape only what may not appear in a request target (space, non-ASCII, control
    # characters, quotes, brackets, backslash...), keeping the marker's own escapes
    # and reserved characters as they are, as Go's url.Parse and String do.
    ref = URL(quote(path or "/", safe=_KEEP), encoded=True)  # ValueError: not a path
    raw_path = ref.raw_path if ref.raw_path.startswith("/") else f"/{ref.raw_path}"
    query = f"?{ref.raw_query_string}" if ref.raw_query_string else ""
    return URL(f"{scheme.lower()}://{address.authority}{raw_path}{query}", encoded=True)


def _headers(headers: Iterable[HTTPHeader], user_agent: str) -> CIMultiDict[str]:
    result: CIMultiDict[str] = CIMultiDict()
    for header in headers:
        result.add(header.name, header.value)
    result.setdefault("User-Agent", user_agent)
    result.setdefault("Accept", "*/*")
    return result


_AWAITING_HEADERS: Final = "connecting and awaiting headers"


@dataclass(slots=True)
class _Progress:
    """Where a run is, for the message of a timeout."""

    phase: str = _AWAITING_HEADERS


def _not_followed(status: int, location: str | None) -> str:
    if status not in _REDIRECTS:
        return f"warning: HTTP {status}, not a redirect to follow"
    if location is None:
        return f"warning: HTTP {status} with no Location header, not followed"
    shown = _without_userinfo(location)
    return f"warning: HTTP {status} redirect to {shown} not followed (another host or port)"


def _without_userinfo(location: str) -> str:
    """`location` for a message: a user name or password in it is not repeated."""
    try:
        ref = URL(location)
    except (ValueError, TypeError):
        return location
    return str(ref.with_user(None)) if ref.raw_user or ref.raw_password else location


def _same_place(a: URL, b: URL) -> bool:
    return a.host == b.host and a.port == b.port


def _with_body(text: str, body: str) -> str:
    return f"{text}: {body}" if body else text


def failure_message(status: int, body: str) -> str:
    """The message of an answer with a failing status: the kubelet's words, then the
    first line of `body` when it has one that is not markup (see the module)."""
    text = f"HTTP probe failed with statuscode: {status}"
    line = first_line(body, limit=FAILURE_LINE_LIMIT)
    return text if not line or line.startswith("<") else f"{text}: {line}"


class HTTPGetHandler(OwnsConnections):
    """Runs httpGet actions; see the module docstring. Use as an async context manager
    (it owns a connection pool) or call `aclose()`. `max_idle`: idle keep-alive
    connections kept at most."""

    def __init__(
        self, *, user_agent: str = f"probemarker/{__version__}", max_idle: int = DEFAULT_MAX_IDLE
    ) -> None:
        if max_idle < 0:
            raise ValueError(f"max_idle must be 0 or more, not {max_idle}")
        self._user_agent = user_agent
        self.max_idle = max_idle
        self.stats = PoolStats()
        self._session: aiohttp.ClientSession | None = None
        self._connector: BoundedConnector | None = None
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"HTTPGetHandler(user_agent={self._user_agent!r}, idle={self.idle}, "
            f"max_idle={self.max_idle})"
        )

    @property
    def idle(self) -> int:
        """Idle keep-alive connections held now (a descriptor each)."""
        connector = self._connector
        return 0 if connector is None or connector.closed else connector.idle

    def idle_by_namespace(self) -> dict[str, int]:
        """Idle keep-alive connections held now, by the namespace of the pod probed."""
        connector = self._connector
        return {} if connector is None or connector.closed else dict(connector.idle_by_namespace())

    async def aclose(self) -> None:
        """Close the pool; a run after this is Unknown (no pool left to leak)."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _pool(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._connector = BoundedConnector(
                max_idle=self.max_idle, stats=self.stats, keepalive_timeout=KEEPALIVE
            )
            self._session = aiohttp.ClientSession(
                connector=self._connector,
                cookie_jar=aiohttp.DummyCookieJar(),  # nothing carried from one pod to another
                auto_decompress=False,
                skip_auto_headers=("Accept-Encoding",),
                trust_env=False,  # no proxy: the request goes to the pod IP itself
            )
        return self._session

    async def run(self, action: Handler, target: ProbeTarget, *, time_limit: float) -> Outcome:
        if not isinstance(action, HTTPGetAction):
            raise TypeError(f"HTTPGetHandler cannot run {type(action).__name__}")
        address = address_of(action.port, target)
        if isinstance(address, NoAddress):
            return Outcome.unknown(address.reason)
        if self._closed:
            return Outcome.unknown("the httpGet probe handler is closed")
        try:
            url = request_url(action.scheme, address, action.path)
            headers = _headers(action.headers, self._user_agent)
        except ValueError as err:
            return Outcome.unknown(f"cannot build the request for {address}: {err}")
        self._pool()
        if self._connector is not None:
            self._connector.own(address, target.namespace)
        progress = _Progress()
        with anyio.move_on_after(time_limit):
            return await self._get(url, headers, progress)
        return Outcome.failed(f"GET {url} timed out after {time_limit:g}s {progress.phase}")

    async def _get(self, url: URL, headers: CIMultiDict[str], progress: _Progress) -> Outcome:
        """Follow same-place redirects; judge the last answer."""
        start, custom_host = url, "Host" in headers
        for _ in range(MAX_REDIRECTS):  # as Go's client: 10 requests, then an error
            try:
                status, location, body = await self._exchange(url, headers, progress)
            except ValueError as err:  # aiohttp refused to send it (a control character)
                return Outcome.unknown(f"cannot send GET {url}: {err}")
            except Exception as err:  # aiohttp's and the socket's errors are answers
                message = f"GET {url}: {_describe(err)}"
                return Outcome.unknown(message) if local_shortage(err) else Outcome.failed(message)
            if not 300 <= status < 400:
                if status >= 400 or status < 200:
                    return Outcome.failed(failure_message(status, body), answer=body)
                return Outcome.succeeded(body, answer=body)
            following = None
            if status in _REDIRECTS and location is not None:
                following = _follow(url, location)
            if following is None or not _same_place(following[0], start):
                message = _with_body(_not_followed(status, location), body)
                return Outcome.succeeded(message, answer=body)
            url, absolute = following
            if custom_host and absolute:
                headers = headers.copy()
                del headers["Host"]
                custom_host = False
        return Outcome.failed(f"GET {start}: stopped after {MAX_REDIRECTS} redirects")

    async def _exchange(
        self, url: URL, headers: CIMultiDict[str], progress: _Progress
    ) -> tuple[int, str | None, str]:
        """One request: its status, Location and the first BODY_LIMIT bytes of its body."""
        progress.phase = _AWAITING_HEADERS
        response = await self._pool().get(
            url,
            headers=headers,
            allow_redirects=False,
            ssl=False,  # HTTPS without a certificate check, as the kubelet
            timeout=aiohttp.ClientTimeout(total=None),  # the caller bounds the whole run
        )
        complete = False
        try:
            progress.phase = f"reading the body (HTTP {response.status})"
            body = bytearray()
            while len(body) < BODY_LIMIT:
                chunk = await response.content.read(BODY_LIMIT - len(body))
                if not chunk:
                    break
                body += chunk
            complete = response.content.at_eof()
        finally:
            if complete:
                response.release()  # back to the pool
            else:
                response.close()  # unread body or cancelled: the connection cannot be reused
        text = clean_message(body.decode("utf-8", errors="replace"))
        return response.status, response.headers.get("Location"), text


def _follow(url: URL, location: str) -> tuple[URL, bool] | None:
    """Where `location` leads from `url`, and whether it named a host; None if invalid.
    A user name or password in it is dropped: aiohttp would send them as Basic auth."""
    try:
        ref = URL(location)
        return url.join(ref).with_user(None), ref.is_absolute()
    except (ValueError, TypeError):
        return None


def _describe(err: Exception) -> str:
    if isinstance(err, aiohttp.ClientConnectorError):
        return f"cannot connect to {err.host}:{err.port}: {os_reason(err.os_error)}"
    if isinstance(err, ssl.SSLError | aiohttp.ClientSSLError):
        return f"TLS handshake failed: {err}"
    if isinstance(err, aiohttp.ServerDisconnectedError):
        return "the server closed the connection without an answer"
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
