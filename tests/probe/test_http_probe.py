"""The httpGet handler against a real HTTP server on a pod-like 127.x address.

Every case goes through `ProbeRunner`, as the engine calls it, and the handler's own
connection pool; time limits are short and the slow routes hang until the server
is torn down, so a test that does not time out in the handler fails on the global
timeout instead of passing.
"""

from __future__ import annotations

import contextlib
import ipaddress
from pathlib import Path
from types import MappingProxyType

import orjson
import pytest

from probemarker import __version__
from probemarker.api.model import HTTPGetAction, HTTPHeader, ProbeSpec, Timing
from probemarker.probe.handler import ProbeTarget
from probemarker.probe.http import BODY_LIMIT, HTTPGetHandler, request_url
from probemarker.probe.outcome import Outcome, Result
from probemarker.probe.ports import Address
from probemarker.probe.runner import ProbeRunner
from probemarker.watch.pods import PodUID
from tests.probe.servers import OTHER_HOST, closed_port, http_server

POD_IP = "127.0.1.150"


def target(
    port: int | None = None, *, ip: str | None = POD_IP, namespace: str = "default"
) -> ProbeTarget:
    ports = MappingProxyType({"web": port}) if port is not None else MappingProxyType({})
    return ProbeTarget(namespace, "web", PodUID("uid-1"), "app", pod_ip=ip, ports=ports)


async def probe(
    handler: HTTPGetHandler,
    action: HTTPGetAction,
    port: int | None,
    *,
    seconds: int = 2,
    ip: str | None = POD_IP,
    namespace: str = "default",
) -> Outcome:
    runner = ProbeRunner({HTTPGetAction: handler})
    spec = ProbeSpec("check", "app", action, Timing(timeout_seconds=seconds))
    return await runner.run(spec, target(port, ip=ip, namespace=namespace))


@pytest.mark.parametrize(
    ("path", "result", "message"),
    [
        pytest.param("/ok", Result.SUCCEEDED, "all good", id="200"),
        pytest.param("/status/204", Result.SUCCEEDED, "", id="204-no-body"),
        pytest.param("/redirect?to=/ok", Result.SUCCEEDED, "all good", id="302-same-host-followed"),
        pytest.param(
            f"/redirect?to=http://{OTHER_HOST}/ok",
            Result.SUCCEEDED,
            f"warning: HTTP 302 redirect to http://{OTHER_HOST}/ok not followed "
            "(another host or port): moved",
            id="302-other-host-not-followed",
        ),
        pytest.param(
            "/no-location",
            Result.SUCCEEDED,
            "warning: HTTP 301 with no Location header, not followed: moved, but where",
            id="301-no-location",
        ),
        pytest.param(
            "/multiple-choices",
            Result.SUCCEEDED,
            "warning: HTTP 300, not a redirect to follow: choose",
            id="300-not-followed",
        ),
        pytest.param(
            f"/redirect?to=http://user:secret@{OTHER_HOST}/x",
            Result.SUCCEEDED,
            f"warning: HTTP 302 redirect to http://{OTHER_HOST}/x not followed "
            "(another host or port): moved",
            id="userinfo-not-shown",
        ),
        pytest.param(
            "/status/404",
            Result.FAILED,
            "HTTP probe failed with statuscode: 404: answer 404",
            id="404",
        ),
        pytest.param(
            "/status/500",
            Result.FAILED,
            "HTTP probe failed with statuscode: 500: answer 500",
            id="500",
        ),
        pytest.param(
            "/redirect?to=/redirect%3Fto%3D/status/503",
            Result.FAILED,
            "HTTP probe failed with statuscode: 503: answer 503",
            id="redirect-chain-to-503",
        ),
    ],
)
async def test_status_and_redirects(path: str, result: Result, message: str) -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        outcome = await probe(handler, HTTPGetAction(port=server.port, path=path), server.port)
    assert (outcome.result, outcome.message) == (result, message)


@pytest.mark.parametrize(
    ("path", "answer"),
    [
        pytest.param("/ok", "all good", id="200"),
        pytest.param(f"/redirect?to=http://{OTHER_HOST}/ok", "moved", id="302-not-followed"),
        pytest.param("/status/503", "answer 503", id="503"),
    ],
)
async def test_the_body_is_the_answer_whatever_the_status(path: str, answer: str) -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        outcome = await probe(handler, HTTPGetAction(port=server.port, path=path), server.port)
    assert outcome.answer == answer


async def test_an_html_error_page_is_left_out_of_the_message() -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        action = HTTPGetAction(port=server.port, path="/html-404")
        outcome = await probe(handler, action, server.port)
    assert outcome.result is Result.FAILED
    assert outcome.message == "HTTP probe failed with statuscode: 404"
    assert outcome.answer.startswith("<!DOCTYPE html>\n<html>")
    assert len(outcome.answer.encode()) <= BODY_LIMIT


async def test_a_hostile_failure_body_gives_one_short_clean_line() -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        action = HTTPGetAction(port=server.port, path="/hostile-500")
        outcome = await probe(handler, action, server.port)
    assert outcome.result is Result.FAILED
    assert outcome.message.startswith("HTTP probe failed with statuscode: 500: ")
    assert "\n" not in outcome.message
    assert "\x1b" not in outcome.message
    assert len(outcome.message.encode()) < 160


async def test_a_redirect_to_the_same_host_on_another_port_is_not_followed() -> None:
    async with (
        http_server(POD_IP) as server,
        http_server(POD_IP) as other,
        HTTPGetHandler() as handler,
    ):
        path = f"/redirect?to=http://{POD_IP}:{other.port}/status/500"
        outcome = await probe(handler, HTTPGetAction(port=server.port, path=path), server.port)
    assert outcome.result is Result.SUCCEEDED
    assert outcome.message.startswith("warning: HTTP 302 redirect to")
    assert other.requests == []


async def test_an_absolute_redirect_to_the_pod_itself_is_followed() -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        path = f"/redirect?to=http://{POD_IP}:{server.port}/status/500"
        outcome = await probe(handler, HTTPGetAction(port=server.port, path=path), server.port)
    assert outcome == Outcome.failed(
        "HTTP probe failed with statuscode: 500: answer 500", answer="answer 500"
    )


async def test_userinfo_in_a_redirect_is_never_sent() -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        path = f"/redirect?to=http://user:secret@{POD_IP}:{server.port}/echo"
        outcome = await probe(handler, HTTPGetAction(port=server.port, path=path), server.port)
    assert outcome.result is Result.SUCCEEDED
    names = {name.lower() for name, _ in orjson.loads(outcome.message)}
    assert "authorization" not in names


@pytest.mark.parametrize(
    ("location", "host"),
    [
        pytest.param("/echo", "example.com", id="relative-keeps-host"),
        pytest.param("http://{ip}:{port}/echo", "{ip}:{port}", id="absolute-drops-host"),
    ],
)
async def test_a_custom_host_across_a_redirect(location: str, host: str) -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        to = location.format(ip=POD_IP, port=server.port)
        action = HTTPGetAction(
            port=server.port,
            path=f"/redirect?to={to}",
            headers=(HTTPHeader("Host", "example.com"),),
        )
        outcome = await probe(handler, action, server.port)
    received = dict(orjson.loads(outcome.message))
    assert received["Host"] == host.format(ip=POD_IP, port=server.port)


async def test_proxy_variables_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    async with (
        http_server(POD_IP) as server,
        http_server("127.0.1.152") as proxy,
        HTTPGetHandler() as handler,
    ):
        for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
            monkeypatch.setenv(name, f"http://127.0.1.152:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        outcome = await probe(handler, HTTPGetAction(port=server.port, path="/ok"), server.port)
    assert outcome == Outcome.succeeded("all good", answer="all good")
    assert proxy.requests == []


async def test_a_closed_handler_runs_nothing() -> None:
    async with http_server(POD_IP) as server:
        handler = HTTPGetHandler()
        await handler.aclose()
        outcome = await probe(handler, HTTPGetAction(port=server.port, path="/ok"), server.port)
    assert outcome == Outcome.unknown("the httpGet probe handler is closed")
    assert server.requests == []


async def test_a_path_that_is_not_one_is_unknown() -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        outcome = await probe(
            handler, HTTPGetAction(port=server.port, path="//[x/healthz"), server.port
        )
    assert outcome.result is Result.UNKNOWN
    assert outcome.message.startswith(f"cannot build the request for {POD_IP}:{server.port}: ")
    assert server.requests == []


async def test_a_redirect_loop_stops_after_ten() -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        outcome = await probe(handler, HTTPGetAction(port=server.port, path="/loop"), server.port)
    url = f"http://{POD_IP}:{server.port}/loop"
    assert outcome == Outcome.failed(f"GET {url}: stopped after 10 redirects")
    assert len(server.requests) == 10  # as Go's client (and so the kubelet)


@pytest.mark.parametrize(
    ("path", "phase"),
    [
        pytest.param("/slow-headers", "connecting and awaiting headers", id="slow-headers"),
        pytest.param("/slow-body", "reading the body (HTTP 200)", id="slow-body"),
    ],
)
async def test_slow_answers_time_out(path: str, phase: str) -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        outcome = await probe(
            handler, HTTPGetAction(port=server.port, path=path), server.port, seconds=1
        )
        url = f"http://{POD_IP}:{server.port}{path}"
        assert outcome == Outcome.failed(f"GET {url} timed out after 1s {phase}")
        # The connection of a timed-out run is closed, not pooled: the next run is new.
        seen = set(server.peers)
        assert (
            await probe(handler, HTTPGetAction(port=server.port, path="/ok"), server.port)
        ).result is Result.SUCCEEDED
        assert len(server.peers - seen) == 1


async def test_https_with_a_self_signed_certificate(tmp_path: Path) -> None:
    async with http_server(POD_IP, tls_dir=tmp_path) as server, HTTPGetHandler() as handler:
        outcome = await probe(
            handler, HTTPGetAction(port=server.port, path="/ok", scheme="HTTPS"), server.port
        )
        plain = await probe(handler, HTTPGetAction(port=server.port, path="/ok"), server.port)
    assert outcome == Outcome.succeeded("all good", answer="all good")
    assert plain.result is Result.FAILED  # HTTP to a TLS port is the container's answer


async def test_headers_are_sent_and_host_sets_only_the_header() -> None:
    action = HTTPGetAction(
        port="web",
        path="/echo",
        headers=(
            HTTPHeader("X-Custom", "one"),
            HTTPHeader("X-Custom", "two"),
            HTTPHeader("Host", "example.com"),
        ),
    )
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        outcome = await probe(handler, action, server.port)
    assert outcome.result is Result.SUCCEEDED
    received = orjson.loads(outcome.message)
    assert ["Host", "example.com"] in received  # the header only: we reached the pod IP
    assert ["X-Custom", "one"] in received
    assert ["X-Custom", "two"] in received
    assert ["User-Agent", f"probemarker/{__version__}"] in received
    assert ["Accept", "*/*"] in received
    assert not any(name.lower() == "accept-encoding" for name, _ in received)


async def test_a_header_with_a_line_break_is_not_sent() -> None:
    """Header values are free text in the API; a CR/LF would inject a header."""
    action = HTTPGetAction(port="web", path="/echo", headers=(HTTPHeader("X-A", "a\r\nX-B: 1"),))
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        outcome = await probe(handler, action, server.port)
    assert outcome.result is Result.UNKNOWN
    assert outcome.message.startswith(f"cannot send GET http://{POD_IP}:{server.port}/echo: ")
    assert server.requests == []


async def test_the_marker_may_set_user_agent_and_accept() -> None:
    action = HTTPGetAction(
        port="web",
        path="/echo",
        headers=(HTTPHeader("user-agent", "mine/1"), HTTPHeader("Accept", "text/plain")),
    )
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        outcome = await probe(handler, action, server.port)
    received = {name.lower(): value for name, value in orjson.loads(outcome.message)}
    assert received["user-agent"] == "mine/1"
    assert received["accept"] == "text/plain"


async def test_connections_are_reused_across_runs() -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        for _ in range(5):
            outcome = await probe(handler, HTTPGetAction(port=server.port, path="/ok"), server.port)
            assert outcome.result is Result.SUCCEEDED
    assert len(server.requests) == 5
    assert len(server.peers) == 1


async def test_a_large_body_is_cut_to_the_limit() -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        first = await probe(handler, HTTPGetAction(port=server.port, path="/big"), server.port)
        then = await probe(handler, HTTPGetAction(port=server.port, path="/ok"), server.port)
    assert first == Outcome.succeeded("x" * BODY_LIMIT, answer="x" * BODY_LIMIT)
    assert then == Outcome.succeeded("all good", answer="all good")


async def test_hostile_body_is_sanitised() -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler() as handler:
        outcome = await probe(
            handler, HTTPGetAction(port=server.port, path="/hostile"), server.port
        )
    assert outcome.result is Result.SUCCEEDED
    assert "\x1b" not in outcome.message
    assert "\x00" not in outcome.message
    assert "red" in outcome.message


async def test_connection_refused_is_failed() -> None:
    with closed_port(POD_IP) as port:
        async with HTTPGetHandler() as handler:
            outcome = await probe(handler, HTTPGetAction(port=port, path="/ok"), port)
    assert outcome.result is Result.FAILED
    assert outcome.message == (
        f"GET http://{POD_IP}:{port}/ok: cannot connect to {POD_IP}:{port}: Connection refused"
    )


@pytest.mark.parametrize(
    ("ip", "port", "reason"),
    [
        pytest.param(None, 8080, "pod default/web has no IP yet (status.podIP)", id="no-pod-ip"),
        pytest.param(
            POD_IP,
            "metrics",
            "container app has no port named 'metrics' in its ports",
            id="no-such-port",
        ),
    ],
)
async def test_no_address_is_unknown(ip: str | None, port: int | str, reason: str) -> None:
    async with HTTPGetHandler() as handler:
        outcome = await probe(handler, HTTPGetAction(port=port), 8080, ip=ip)
    assert outcome == Outcome.unknown(reason)


@pytest.mark.parametrize(
    ("scheme", "host", "port", "path", "url"),
    [
        pytest.param("HTTP", "10.0.0.1", 80, "/", "http://10.0.0.1/", id="root"),
        pytest.param(
            "HTTPS", "10.0.0.1", 8443, "/a?b=c", "https://10.0.0.1:8443/a?b=c", id="query"
        ),
        pytest.param("HTTP", "10.0.0.1", 80, "healthz", "http://10.0.0.1/healthz", id="no-slash"),
        pytest.param("HTTP", "10.0.0.1", 80, "", "http://10.0.0.1/", id="empty"),
        pytest.param(
            "HTTP",
            "10.0.0.1",
            80,
            "http://evil.example/x",
            "http://10.0.0.1/x",
            id="host-in-path-ignored",
        ),
        pytest.param(
            "HTTP",
            "10.0.0.1",
            80,
            "//evil.example/x",
            "http://10.0.0.1/x",
            id="authority-in-path-ignored",
        ),
        pytest.param("HTTP", "10.0.0.1", 80, "/a%20b", "http://10.0.0.1/a%20b", id="encoded-kept"),
        pytest.param("HTTP", "fd00::1", 80, "/ok", "http://[fd00::1]/ok", id="ipv6"),
        pytest.param(
            "HTTP",
            "10.0.0.1",
            80,
            "/a b?q=%2F&r=c d",
            "http://10.0.0.1/a%20b?q=%2F&r=c%20d",
            id="spaces-escaped",
        ),
        pytest.param("HTTP", "10.0.0.1", 80, "/ü", "http://10.0.0.1/%C3%BC", id="non-ascii"),
        pytest.param("HTTP", "10.0.0.1", 80, "/a#frag", "http://10.0.0.1/a", id="fragment-dropped"),
    ],
)
def test_request_url(scheme: str, host: str, port: int, path: str, url: str) -> None:
    ipaddress.ip_address(host)
    assert str(request_url(scheme, Address(host, port), path)) == url


async def test_responses_are_not_shared_between_servers() -> None:
    """Two pods: each run reaches its own pod."""
    async with (
        http_server(POD_IP) as one,
        http_server("127.0.1.151") as two,
        HTTPGetHandler() as handler,
    ):
        await probe(handler, HTTPGetAction(port=one.port, path="/ok"), one.port)
        await probe(handler, HTTPGetAction(port=two.port, path="/ok"), two.port, ip="127.0.1.151")
    assert len(one.requests) == 1
    assert len(two.requests) == 1


async def test_idle_connections_are_kept_up_to_max_idle() -> None:
    """One idle keep-alive connection per address probed is a descriptor each: at most
    `max_idle` are kept; an answered connection beyond them is closed, and counted.
    The addresses kept first stay kept (they are reused), the others reconnect."""
    async with contextlib.AsyncExitStack() as stack:
        servers = [await stack.enter_async_context(http_server(POD_IP)) for _ in range(4)]
        handler = await stack.enter_async_context(HTTPGetHandler(max_idle=2))
        for _ in range(3):
            for server in servers:
                outcome = await probe(
                    handler, HTTPGetAction(port=server.port, path="/ok"), server.port
                )
                assert outcome.result is Result.SUCCEEDED
        assert handler.idle == 2
        assert handler.stats.not_kept == 2 * 3
        assert [len(s.peers) for s in servers] == [1, 1, 3, 3]  # kept, kept, new each run


async def test_a_namespace_keeping_every_idle_connection_leaves_another_its_share() -> None:
    """Issue 40: one namespace's pods filled the idle pool, and another's probes
    connected afresh every run; now the other keeps its share (4 / 2 namespaces)."""
    async with contextlib.AsyncExitStack() as stack:
        servers = [await stack.enter_async_context(http_server(POD_IP)) for _ in range(6)]
        handler = await stack.enter_async_context(HTTPGetHandler(max_idle=4))
        flood, theirs = servers[:4], servers[4:]
        for server in flood:
            action = HTTPGetAction(port=server.port, path="/ok")
            await probe(handler, action, server.port, namespace="flood")
        assert handler.idle_by_namespace() == {"flood": 4}
        for _ in range(3):
            for server in theirs:
                action = HTTPGetAction(port=server.port, path="/ok")
                await probe(handler, action, server.port, namespace="other")
        assert handler.idle_by_namespace() == {"flood": 2, "other": 2}
        assert [len(s.peers) for s in theirs] == [1, 1]  # kept and reused
        assert handler.stats.given_up == 2  # the flood's two oldest
        assert handler.stats.not_kept == 0
        for server in flood:  # the flood is at its share now: its surplus is not kept
            action = HTTPGetAction(port=server.port, path="/ok")
            await probe(handler, action, server.port, namespace="flood")
        assert handler.idle_by_namespace() == {"flood": 2, "other": 2}
        assert handler.stats.not_kept == 2


async def test_no_idle_connection_is_kept_with_max_idle_0() -> None:
    async with http_server(POD_IP) as server, HTTPGetHandler(max_idle=0) as handler:
        for _ in range(2):
            await probe(handler, HTTPGetAction(port=server.port, path="/ok"), server.port)
        assert (handler.idle, handler.stats.not_kept, len(server.peers)) == (0, 2, 2)
