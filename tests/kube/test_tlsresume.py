"""The TLS session cache: age cap, forget, counts (pure, with a fake clock)."""

from __future__ import annotations

import ssl
from typing import cast

import pytest

from probemarker.kube.tlsresume import ResumingSSLContext, SessionCache


class FakeSession:
    def __init__(self, ident: bytes) -> None:
        self.id = ident


def session(ident: bytes) -> ssl.SSLSession:
    return cast(ssl.SSLSession, FakeSession(ident))


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_session_used_until_max_age() -> None:
    clock = Clock()
    cache = SessionCache(max_age=600.0, clock=clock)
    first = session(b"1")
    cache.put("api", first)
    clock.now = 600.0
    assert cache.get("api") is first
    clock.now = 600.5
    assert cache.get("api") is None
    assert cache.get("api") is None  # dropped, not offered again


def test_forget_drops_the_session_of_that_server_only() -> None:
    cache = SessionCache()
    cache.put("a", session(b"1"))
    cache.put("b", session(b"2"))
    cache.forget("a")
    assert cache.get("a") is None
    assert cache.get("b") is not None


def test_the_same_session_coming_back_keeps_its_age() -> None:
    clock = Clock()
    cache = SessionCache(max_age=10.0, clock=clock)
    cache.put("api", session(b"1"))
    clock.now = 8.0
    cache.put("api", session(b"1"))  # a resumed connection reports the same session
    clock.now = 11.0
    assert cache.get("api") is None
    assert cache.collected == 1


def test_context_is_a_client_context() -> None:
    context = ResumingSSLContext()
    assert context.protocol == ssl.PROTOCOL_TLS_CLIENT
    assert context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED
    context.forget("nothing-cached")  # never raises


def test_a_tls_failure_forgets_the_session() -> None:
    """client._mapped calls the forget hook on any TLS error, so a session the server
    refuses is not offered again."""
    from probemarker.kube.client import _mapped
    from probemarker.kube.errors import ApiUnreachable, RequestInfo

    cache = SessionCache()
    cache.put("api", session(b"1"))
    with (
        pytest.raises(ApiUnreachable, match="TLS failure"),
        _mapped(RequestInfo("get", "pods"), lambda: cache.forget("api")),
    ):
        raise ssl.SSLError(1, "[SSL: TLSV1_ALERT_INTERNAL_ERROR] handshake failure")
    assert cache.get("api") is None
