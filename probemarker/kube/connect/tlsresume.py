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
from them (a TLS 1.2 session is usable once its handshake is done). A cached
session is offered again and again until it ages out: Go's TLS server (and
OpenSSL's) accept a ticket more than once outside 0-RTT.

Resumption is an optimisation and never fails a connection. Connections opened
at the same moment (the informers at start-up, a burst of execs) find each other
mid-handshake. CPython's `SSLObject.session` copies the session through DER,
and OpenSSL's `i2d_SSL_SESSION` encodes nothing before the server has chosen a
cipher: `ValueError: i2d() failed.`; a little later (TLS 1.2, before the
server's Finished) it reads a session that cannot be resumed yet.
`SSLObject.version()` is None until OpenSSL reports the handshake finished
(`SSL_is_init_finished` in `_ssl.c`). So only finished handshakes are read, an
unfinished one is looked at again at the next harvest, and a session that
cannot be read, or that `wrap_bio` refuses (one of another `SSLContext`, after
a client was re-opened with the same cache), is dropped: that connection does a
full handshake.

Invariants: only sessions of finished handshakes enter the cache; nothing here
raises because of a session (a debug line and `SessionCache.unusable` count it);
a cached session is used for at most `max_age` seconds after it was
collected (Go servers rotate ticket keys; an old ticket only costs a full
handshake, but there is no reason to keep offering it); `forget()` (called by
the client after a TLS failure) drops it, so a broken session is never offered
twice; sessions are keyed by the server name the handshake verifies.
"""

from __future__ import annotations

import ssl
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import structlog

__all__ = ["Handshake", "ResumingSSLContext", "SessionCache", "collect_sessions"]

log = structlog.get_logger(__name__)

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
        self.unusable = 0  # sessions that could not be read, or that wrap_bio refused

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


class Handshake(Protocol):
    """What harvesting reads of an `ssl.SSLObject` (tests pass fakes)."""

    @property
    def session(self) -> ssl.SSLSession | None: ...

    def version(self) -> str | None: ...


H = TypeVar("H", bound=Handshake)


def collect_sessions(pending: Iterable[tuple[str, H]], cache: SessionCache) -> list[tuple[str, H]]:
    """Put the resumable sessions of finished handshakes into `cache`; return the
    connections to look at again (handshake unfinished, or TLS 1.3 without a ticket yet)."""
    again: list[tuple[str, H]] = []
    for name, connection in pending:
        version = connection.version()
        if version is None:
            again.append((name, connection))  # unfinished: its session cannot be read yet
            continue
        try:
            session = connection.session
        except Exception as err:  # ValueError ("i2d() failed."), SSLError, whatever _ssl raises
            cache.unusable += 1
            log.debug("tls.session_unreadable", server=name, error=repr(err))
            continue  # finished and still unreadable: it will not get better
        if session is not None and (session.has_ticket or version != "TLSv1.3"):
            cache.put(name, session)
        else:
            again.append((name, connection))
    return again


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
        again = collect_sessions(self._pending, self.cache)
        self._pending.clear()
        self._pending.extend(again)

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        name = server_hostname.decode() if isinstance(server_hostname, bytes) else server_hostname
        if server_side or not name or session is not None:
            return super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)
        cached = self.cache.get(name)
        if cached is None:
            # Only now: reading `SSLObject.session` copies the session through DER
            # (~0.2 ms in CPython), as much as resumption saves on a cheap handshake.
            self.harvest()
            cached = self.cache.get(name)
        obj = None
        if cached is not None:
            try:
                obj = super().wrap_bio(incoming, outgoing, False, server_hostname, cached)
                self.cache.offered += 1
            except Exception as err:  # "Session refers to a different SSLContext.", SSLError
                self.cache.unusable += 1
                self.cache.forget(name)
                log.debug("tls.session_refused", server=name, error=repr(err))
        if obj is None:
            obj = super().wrap_bio(incoming, outgoing, False, server_hostname)
        self._pending.append((name, obj))
        return obj

    def forget(self, name: str) -> None:
        """Drop the session for `name` and any pending one (after a TLS failure)."""
        self.cache.forget(name)
        self._pending = deque(((n, o) for n, o in self._pending if n != name), maxlen=_PENDING)
