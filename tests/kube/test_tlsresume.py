"""The TLS session cache: age cap, forget, counts (pure, with a fake clock); what
harvesting takes from a connection, and what it does when a session cannot be read
or reused (hand-written fakes; real handshakes are in test_tlsresume_handshakes.py)."""

from __future__ import annotations

import ssl
from typing import cast

import pytest
from structlog.testing import capture_logs

from probemarker.kube.connect.tlsresume import ResumingSSLContext, SessionCache, collect_sessions


class FakeSession:
    def __init__(self, ident: bytes, *, has_ticket: bool = True) -> None:
        self.id = ident
        self.has_ticket = has_ticket


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
    from probemarker.kube.connect.errors import ApiUnreachable, RequestInfo
    from probemarker.kube.connect.sessions import mapped as _mapped

    cache = SessionCache()
    cache.put("api", session(b"1"))
    with (
        pytest.raises(ApiUnreachable, match="TLS failure"),
        _mapped(RequestInfo("get", "pods"), lambda: cache.forget("api")),
    ):
        raise ssl.SSLError(1, "[SSL: TLSV1_ALERT_INTERNAL_ERROR] handshake failure")
    assert cache.get("api") is None


class FakeHandshake:
    """An `SSLObject` as harvesting sees it: `version()` is None until the handshake is
    done (CPython checks `SSL_is_init_finished`); reading `session` raises `error`."""

    def __init__(
        self,
        version: str | None,
        session: FakeSession | None = None,
        error: Exception | None = None,
    ) -> None:
        self._version = version
        self._session = session
        self._error = error
        self.reads = 0

    @property
    def session(self) -> ssl.SSLSession | None:
        self.reads += 1
        if self._error is not None:
            raise self._error
        return cast(ssl.SSLSession | None, self._session)

    def version(self) -> str | None:
        return self._version


I2D = ValueError("i2d() failed.")  # CPython, reading the session of an unfinished handshake


@pytest.mark.parametrize(
    ("connection", "kept", "collected", "unusable"),
    [
        pytest.param(FakeHandshake(None, error=I2D), True, False, 0, id="unfinished-kept-unread"),
        pytest.param(FakeHandshake("TLSv1.3", error=I2D), False, False, 1, id="i2d-failed"),
        pytest.param(
            FakeHandshake("TLSv1.2", error=ssl.SSLError(1, "[SSL] internal error")),
            False,
            False,
            1,
            id="ssl-error",
        ),
        pytest.param(
            FakeHandshake("TLSv1.3", error=SystemError("error return without exception set")),
            False,
            False,
            1,
            id="any-error",
        ),
        pytest.param(
            FakeHandshake("TLSv1.3", FakeSession(b"1", has_ticket=False)),
            True,
            False,
            0,
            id="tls1.3-ticket-not-yet-read",
        ),
        pytest.param(FakeHandshake("TLSv1.3", FakeSession(b"1")), False, True, 0, id="tls1.3"),
        pytest.param(
            FakeHandshake("TLSv1.2", FakeSession(b"1", has_ticket=False)),
            False,
            True,
            0,
            id="tls1.2-session-id",
        ),
        pytest.param(FakeHandshake("TLSv1.3", None), True, False, 0, id="no-session-yet"),
    ],
)
def test_what_harvesting_takes_from_a_connection(
    connection: FakeHandshake, kept: bool, collected: bool, unusable: int
) -> None:
    cache = SessionCache()
    again = collect_sessions([("api", connection)], cache)
    assert again == ([("api", connection)] if kept else [])
    assert (cache.get("api") is not None) is collected
    assert cache.unusable == unusable
    if connection.version() is None:
        assert connection.reads == 0  # an unfinished handshake's session is never read


def test_an_unreadable_session_does_not_stop_the_others() -> None:
    cache = SessionCache()
    good = FakeHandshake("TLSv1.3", FakeSession(b"good"))
    with capture_logs() as logs:
        collect_sessions([("api", FakeHandshake("TLSv1.3", error=I2D)), ("api", good)], cache)
    assert cache.get("api") is cast(ssl.SSLSession, good._session)
    assert [entry["log_level"] for entry in logs] == ["debug"]  # no noise per connection


def test_a_session_wrap_bio_refuses_is_forgotten_and_the_connection_goes_on() -> None:
    """OpenSSL can refuse the cached session (`ValueError: Session refers to a different
    SSLContext.`, `TypeError`, an SSLError): the connection is wrapped without one."""
    context = ResumingSSLContext()
    context.cache.put("api", session(b"not a real session"))  # _ssl refuses it: TypeError
    with capture_logs() as logs:
        obj = context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="api")
    assert obj.server_hostname == "api"
    assert context.cache.get("api") is None
    assert (context.cache.offered, context.cache.unusable) == (0, 1)
    assert [entry["log_level"] for entry in logs] == ["debug"]
    context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="api")  # nothing cached
    assert (context.cache.offered, context.cache.unusable) == (0, 1)


def test_a_session_the_caller_passes_is_the_callers_business() -> None:
    context = ResumingSSLContext()
    with pytest.raises(TypeError):
        context.wrap_bio(
            ssl.MemoryBIO(),
            ssl.MemoryBIO(),
            server_hostname="api",
            session=session(b"not a real session"),
        )
