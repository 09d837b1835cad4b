"""TLS session resumption for the connections to the API server.

Stage: part of the client's connection setup. Every exec is a WebSocket on a
new TLS connection; a full handshake costs about as much client CPU as the rest
of the exec (measured on a real kube-apiserver: ~3 ms of ~6 ms), and the Go TLS
server resumes sessions from tickets by default. Python's asyncio does not
resume on its own: it calls `SSLContext.wrap_bio()` without a session for every
connection. `ResumingSSLContext` overrides `wrap_bio` to offer the newest
session it holds for that server name.

How sessions are collected: a TLS 1.3 server sends its tickets after the
handshake, so a session is only resumable once some application data has been
read. The context keeps the last few `SSLObject`s it created and, when a new
connection finds no usable session in the cache, takes one that carries a ticket
from them (a TLS 1.2 session is usable at once). A cached session is offered
again and again until it ages out: Go's TLS server (and OpenSSL's) accept a
ticket more than once outside 0-RTT.

Invariants: a cached session is used for at most `max_age` seconds after it was
collected (Go servers rotate ticket keys; an old ticket only costs a full
handshake, but there is no reason to keep offering it); `forget()` (called by
the client after a TLS failure) drops it, so a broken session is never offered
twice; sessions are keyed by the server name the handshake verifies.
"""

from __future__ import annotations

import ssl
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ResumingSSLContext", "SessionCache"]

_PENDING = 8  # SSLObjects kept to harvest tickets from (a few concurrent connections)


@dataclass(slots=True)
class _Entry:
    session: ssl.SSLSession
    collected: float


class SessionCache:
    """Sessions per server name, each usable for `max_age` seconds; counts reuse."""

    def __init__(self, *, max_age: float = 600.0, clock: Callable[[], float] = time.monotonic):
        self.max_age = max_age
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self.offered = 0
        self.collected = 0

    def get(self, name: str) -> ssl.SSLSession | None:
        entry = self._entries.get(name)
        if entry is None:
            return None
        if self._clock() - entry.collected > self.max_age:
            del self._entries[name]
            return None
        return entry.session

    def put(self, name: str, session: ssl.SSLSession) -> None:
        current = self._entries.get(name)
        if current is not None and current.session.id == session.id:
            return  # the session we offered came back (resumed): keep its age
        self._entries[name] = _Entry(session, self._clock())
        self.collected += 1

    def forget(self, name: str) -> None:
        self._entries.pop(name, None)

    def __repr__(self) -> str:
        return f"SessionCache(names={len(self._entries)}, max_age={self.max_age})"


class ResumingSSLContext(ssl.SSLContext):
    """A client `SSLContext` that offers cached sessions; see the module docstring."""

    cache: SessionCache
    _pending: deque[tuple[str, ssl.SSLObject]]

    def __new__(cls, *args: Any, **kwargs: Any) -> ResumingSSLContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self, *, cache: SessionCache | None = None) -> None:
        self.cache = cache if cache is not None else SessionCache()
        self._pending = deque(maxlen=_PENDING)

    def harvest(self) -> None:
        """Move resumable sessions from recent connections into the cache."""
        keep: list[tuple[str, ssl.SSLObject]] = []
        for name, obj in self._pending:
            session = obj.session
            if session is not None and (session.has_ticket or obj.version() != "TLSv1.3"):
                self.cache.put(name, session)
            else:
                keep.append((name, obj))
        self._pending.clear()
        self._pending.extend(keep)

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        name = server_hostname.decode() if isinstance(server_hostname, bytes) else server_hostname
        if not server_side and name and session is None:
            session = self.cache.get(name)
            if session is None:
                # Only now: reading `SSLObject.session` copies the session through DER
                # (~0.2 ms in CPython), as much as resumption saves on a cheap handshake.
                self.harvest()
                session = self.cache.get(name)
            if session is not None:
                self.cache.offered += 1
        obj = super().wrap_bio(
            incoming,
            outgoing,
            server_side=server_side,
            server_hostname=server_hostname,
            session=session,
        )
        if not server_side and name:
            self._pending.append((name, obj))
        return obj

    def forget(self, name: str) -> None:
        """Drop the session for `name` and any pending one (after a TLS failure)."""
        self.cache.forget(name)
        self._pending = deque(((n, o) for n, o in self._pending if n != name), maxlen=_PENDING)
