"""Serving WATCH requests as a stream of JSON watch events.

A watch is a chunked `200 application/json` response carrying one
`{"type": ..., "object": ...}` document per line, as kube-apiserver sends
them.  The stream ends when:

* `timeoutSeconds` elapses (clean end, like the server's request timeout);
* the store's watch ends (e.g. after the ERROR event carrying 410 Gone);
* `WatchRegistry.close_all` is called by the faults (clean or abrupt: an
  abrupt close drops the connection without the chunked terminator, as a
  lost connection looks to a client);
* the client goes away.

`WatchRegistry.stall_all` makes watches half-open (the faults' `stall_watches`):
a stalled stream sends nothing more, keeps its connection open and no longer ends
at `timeoutSeconds`; it ends only when the client leaves (or on `close_all`).
That is what a client sees when a NAT entry, a load balancer or a dead API server
drops the connection without a FIN or RST: only a client-side read deadline
notices. With `new_too`, streams opened later stall right after their headers.

Objects are converted to the watched version (`convert`, e.g. core/v1 events
to events.k8s.io/v1) except ERROR and BOOKMARK events; a BOOKMARK's object only
has its `apiVersion` and `kind` set to the watched group-version's, as
kube-apiserver encodes its (otherwise empty) bookmark object in the watch's
version: an events.k8s.io/v1 watch gets `events.k8s.io/v1` bookmarks although
the store keeps core/v1 events.

Invariants: events are written in the order the store's watch yields them,
none is skipped; every open stream is in the registry until it ends, and its
store watch is closed in `finally`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

DEFAULT_TIMEOUT_SECONDS = 1800.0
_CLIENT_GONE_POLL = 0.1  # how often a stalled stream checks that its client is still there


class WatchStream:
    """One open watch response; closable from the outside."""

    def __init__(self, watch: Any, request: web.Request) -> None:
        self.watch = watch
        self.request = request
        self.abrupt = False
        self.closed = asyncio.Event()
        self.stalled = asyncio.Event()

    def close(self, *, abrupt: bool) -> None:
        self.abrupt = self.abrupt or abrupt
        self.closed.set()
        self.watch.close()


class WatchRegistry:
    """The open watch streams."""

    def __init__(self) -> None:
        self._streams: set[WatchStream] = set()
        self.stall_new = False  # streams opened from now on stall at once

    def __len__(self) -> int:
        return len(self._streams)

    def add(self, stream: WatchStream) -> None:
        self._streams.add(stream)
        if self.stall_new:
            stream.stalled.set()

    def discard(self, stream: WatchStream) -> None:
        self._streams.discard(stream)

    def close_all(self, abrupt: bool = False) -> int:
        streams = list(self._streams)
        for stream in streams:
            stream.close(abrupt=abrupt)
        return len(streams)

    def stall_all(self, new_too: bool = False) -> int:
        """Make every open stream half-open (and, with `new_too`, every later one);
        returns how many open streams were stalled."""
        self.stall_new = self.stall_new or new_too
        streams = [s for s in self._streams if not s.stalled.is_set()]
        for stream in streams:
            stream.stalled.set()
        return len(streams)

    def unstall_new(self) -> None:
        """Streams opened from now on behave again (stalled ones stay half-open)."""
        self.stall_new = False


async def _hold_open(stream: WatchStream, request: web.Request) -> None:
    """Send nothing until the client leaves or the stream is closed from outside."""
    while not stream.closed.is_set():
        transport = request.transport
        if transport is None or transport.is_closing():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stream.closed.wait(), _CLIENT_GONE_POLL)


async def _pump(
    stream: WatchStream,
    response: web.StreamResponse,
    convert: Callable[[dict[str, Any]], dict[str, Any]],
    type_meta: dict[str, str],
) -> None:
    async for event in stream.watch:
        if stream.closed.is_set():
            return
        if stream.stalled.is_set():
            await stream.closed.wait()  # half-open: never write again (cancelled on exit)
            return
        obj = event.object
        if event.type == "BOOKMARK":
            obj = {**obj, **type_meta}
        elif event.type != "ERROR":
            obj = convert(obj)
        await response.write(orjson.dumps({"type": event.type, "object": obj}) + b"\n")
        if event.type == "ERROR":
            return


async def serve_watch(
    request: web.Request,
    *,
    watch: Any,
    registry: WatchRegistry,
    timeout_seconds: float | None,
    convert: Callable[[dict[str, Any]], dict[str, Any]],
    api_version: str,
    kind: str,
) -> web.StreamResponse:
    """Stream the store watch `watch` (already opened) until one of the ends above;
    `api_version` and `kind` are the watched type's (for BOOKMARK objects)."""
    stream = WatchStream(watch, request)
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    registry.add(stream)
    try:
        await response.prepare(request)
        timeout = timeout_seconds if timeout_seconds is not None else DEFAULT_TIMEOUT_SECONDS
        # The pump is a child of this handler: it ends with it (finally below).
        type_meta = {"kind": kind, "apiVersion": api_version}
        pump = asyncio.ensure_future(_pump(stream, response, convert, type_meta))
        closed = asyncio.ensure_future(stream.closed.wait())
        stalled = asyncio.ensure_future(stream.stalled.wait())
        tasks = (pump, closed, stalled)
        try:
            done, _ = await asyncio.wait(
                set(tasks), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if stalled in done and not (pump in done or closed in done):
                pump.cancel()  # half-open: no more events, no server timeout
                await _hold_open(stream, request)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, ConnectionResetError):
                    await task
        if stream.abrupt:
            if request.transport is not None:
                request.transport.abort()
        else:
            with contextlib.suppress(ConnectionResetError):
                await response.write_eof()
        return response
    finally:
        registry.discard(stream)
        watch.close()
