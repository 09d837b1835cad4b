"""The exec subresource's WebSocket protocol, against real WebSocket clients.

A tiny aiohttp app mounts `serve_exec` for one pod; aiohttp's WebSocket
client (and kubernetes_asyncio's WsApiClient) talk to it over TCP.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from aiohttp import WSMsgType, web

from probemarker.sim.exec.proto import go_json, parse_exec_options
from probemarker.sim.exec.runners import ExecReply, ExecRequest, HandlerRegistry
from probemarker.sim.exec.session import (
    ExecFaults,
    ExecSessions,
    build_exec_target,
    exec_target_error,
    serve_exec,
)

V5, V4, V4B64 = "v5.channel.k8s.io", "v4.channel.k8s.io", "v4.base64.channel.k8s.io"
SUCCESS = {"metadata": {}, "status": "Success"}


def make_pod(*, running: bool = True, containers: tuple[str, ...] = ("app",)) -> dict[str, Any]:
    state = {"running": {"startedAt": "2026-01-01T00:00:00Z"}} if running else {"waiting": {}}
    return {
        "metadata": {"name": "web-0", "namespace": "default", "uid": "uid-1", "labels": {"a": "b"}},
        "spec": {
            "nodeName": "node-1",
            "containers": [
                {
                    "name": name,
                    "env": [
                        {"name": "GREETING", "value": "hello"},
                        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {
                            "name": "LABEL",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['a']"}},
                        },
                    ],
                }
                for name in containers
            ],
        },
        "status": {"containerStatuses": [{"name": n, "state": state} for n in containers]},
    }


@dataclass
class ExecApp:
    """The tiny app's state: pod, runner, faults, and when each handler ended."""

    url: str
    workdir_root: Path
    pod: dict[str, Any] = field(default_factory=make_pod)
    registry: HandlerRegistry = field(default_factory=HandlerRegistry)
    faults: ExecFaults = field(default_factory=ExecFaults)
    sessions: ExecSessions = field(default_factory=ExecSessions)
    finished: asyncio.Queue[None] = field(default_factory=asyncio.Queue)

    def exec_url(self, *command: str, **flags: str) -> str:
        query = [("command", c) for c in command]
        query += list({"stdout": "true", "stderr": "true", **flags}.items())
        return self.url + "?" + urlencode(query)


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[ExecApp]:
    state: list[ExecApp] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        s = state[0]
        try:
            container = request.query.get("container")
            refusal = exec_target_error(s.pod, container)
            if refusal is not None:
                return web.json_response(refusal.to_status(), status=refusal.code)
            target = build_exec_target(s.pod, container, workdir_root=s.workdir_root)
            return await serve_exec(
                request, target=target, runner=s.registry, faults=s.faults, sessions=s.sessions
            )
        finally:
            s.finished.put_nowait(None)

    web_app = web.Application()
    web_app.router.add_route("*", "/api/v1/namespaces/default/pods/web-0/exec", handle)
    # As the sim's own server runs (SimCluster): aiohttp's default, no handler
    # cancellation when a client goes (TestServer turns it on), so a command outlives
    # its client as on a real cluster.
    runner = web.AppRunner(web_app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        state.append(
            ExecApp(
                url=f"http://127.0.0.1:{port}/api/v1/namespaces/default/pods/web-0/exec",
                workdir_root=tmp_path / "workdirs",
            )
        )
        yield state[0]
    finally:
        await runner.cleanup()


@dataclass
class Session:
    channels: dict[int, bytes]
    frames: list[tuple[int, bytes]]
    close_code: int | None
    closed_cleanly: bool
    protocol: str | None

    @property
    def status(self) -> Any:
        return json.loads(self.channels[3]) if self.channels.get(3) else None


async def collect(ws: aiohttp.ClientWebSocketResponse, *, b64: bool = False) -> Session:
    channels: dict[int, bytes] = {}
    frames: list[tuple[int, bytes]] = []
    clean = False
    async for msg in ws:
        if msg.type is WSMsgType.BINARY:
            ch, data = msg.data[0], msg.data[1:]
        elif msg.type is WSMsgType.TEXT:
            assert b64, "text frame on a binary protocol"
            ch, data = int(msg.data[0]), base64.b64decode(msg.data[1:])
        else:
            break
        frames.append((ch, data))
        channels[ch] = channels.get(ch, b"") + data
    if ws.close_code == 1000:
        clean = True
    return Session(channels, frames, ws.close_code, clean, ws.protocol)


async def run_exec(
    app: ExecApp,
    *command: str,
    protocols: tuple[str, ...] = (V5,),
    stdin: bytes | None = None,
    **flags: str,
) -> Session:
    if stdin is not None:
        flags["stdin"] = "true"
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(app.exec_url(*command, **flags), protocols=protocols) as ws,
    ):
        if stdin is not None:
            await ws.send_bytes(b"\x00" + stdin)
            await ws.send_bytes(bytes((255, 0)))  # v5: close stdin
        return await collect(ws, b64=any("base64" in p for p in protocols))


def register(app: ExecApp, reply: ExecReply) -> list[ExecRequest]:
    seen: list[ExecRequest] = []

    async def handler(request: ExecRequest) -> ExecReply:
        seen.append(request)
        return reply

    app.registry.register("default", "web-0", "app", handler)
    return seen


# --- the wire protocol -----------------------------------------------------


async def test_v5_success_separates_streams_and_ends_with_status(app: ExecApp) -> None:
    seen = register(app, ExecReply(0, stdout=b"out\n", stderr=b"err\n"))
    s = await run_exec(app, "check", "--fast")
    assert s.protocol == V5
    assert s.frames[0] == (1, b"")  # the "connection established" frame
    assert s.channels[1] == b"out\n"
    assert s.channels[2] == b"err\n"
    assert s.channels[3] == b'{"metadata":{},"status":"Success"}'
    assert s.frames[-1][0] == 3
    assert s.closed_cleanly
    assert seen[0].command == ("check", "--fast")
    assert seen[0].target.container == "app"


async def test_v5_nonzero_exit_status_is_what_the_apiserver_translator_sends(app: ExecApp) -> None:
    register(app, ExecReply(3, stderr=b"boom"))
    s = await run_exec(app, "check")
    assert s.status == {
        "metadata": {},
        "status": "Failure",
        "message": "command terminated with non-zero exit code: command terminated with exit code 3",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
    }


async def test_v4_nonzero_exit_status_is_what_the_kubelet_sends(app: ExecApp) -> None:
    register(app, ExecReply(2))
    s = await run_exec(app, "sh", "-c", "exit 2", protocols=(V4,))
    assert s.protocol == V4
    assert s.status["message"] == (
        "command terminated with non-zero exit code: error executing command [sh -c exit 2], exit code 2"
    )
    assert s.status["details"]["causes"] == [{"reason": "ExitCode", "message": "2"}]


async def test_v5_is_chosen_whenever_offered(app: ExecApp) -> None:
    register(app, ExecReply(0))
    s = await run_exec(app, "x", protocols=(V4, V5))
    assert s.protocol == V5


async def test_v4_base64_uses_text_frames(app: ExecApp) -> None:
    register(app, ExecReply(0, stdout=b"\x00\xffbinary"))
    s = await run_exec(app, "x", protocols=(V4B64,))
    assert s.protocol == V4B64
    assert s.channels[1] == b"\x00\xffbinary"
    assert s.status == SUCCESS


async def test_unsupported_subprotocol_is_refused_with_403(app: ExecApp) -> None:
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
            await http.ws_connect(app.exec_url("x"), protocols=("v3.channel.k8s.io",))
    assert err.value.status == 403


async def test_plain_request_gets_upgrade_required(app: ExecApp) -> None:
    async with aiohttp.ClientSession() as http, http.post(app.exec_url("x")) as resp:
        assert resp.status == 400
        body = await resp.json()
    assert body["message"] == "Upgrade request required"
    assert body["reason"] == "BadRequest"


async def test_tty_merges_stderr_into_stdout(app: ExecApp) -> None:
    register(app, ExecReply(0, stdout=b"a", stderr=b"b"))
    s = await run_exec(app, "x", tty="true")
    assert s.channels[1] == b"ab"
    assert 2 not in s.channels


async def test_disabled_stream_is_not_sent(app: ExecApp) -> None:
    register(app, ExecReply(0, stdout=b"a", stderr=b"b"))
    s = await run_exec(app, "x", stdout="false")
    assert s.frames[0] == (2, b"")
    assert s.channels[2] == b"b"
    assert 1 not in s.channels


# --- subprocesses ------------------------------------------------------------


async def test_subprocess_runs_in_its_workdir_with_container_env(app: ExecApp) -> None:
    s = await run_exec(app, "sh", "-c", 'echo "$GREETING $POD $LABEL"; pwd; echo oops >&2; exit 4')
    out = s.channels[1].decode().splitlines()
    assert out[0] == "hello web-0 b"
    assert Path(out[1]) == app.workdir_root / "uid-1" / "app"
    assert s.channels[2] == b"oops\n"
    assert s.status["details"]["causes"][0]["message"] == "4"


async def test_subprocess_large_output_arrives_whole(app: ExecApp) -> None:
    s = await run_exec(app, "sh", "-c", "head -c 3000000 /dev/zero")
    assert len(s.channels[1]) == 3_000_000
    assert s.status == SUCCESS


async def test_subprocess_reads_stdin_until_v5_close_signal(app: ExecApp) -> None:
    s = await run_exec(app, "cat", stdin=b"ping\n")
    assert s.channels[1] == b"ping\n"
    assert s.status == SUCCESS


async def test_missing_executable_is_an_oci_runtime_error(app: ExecApp) -> None:
    s = await run_exec(app, "no-such-binary-xyz")
    status = s.status
    assert status["reason"] == "InternalError"
    assert status["code"] == 500
    assert status["message"].startswith(
        "Internal error occurred: Internal error occurred: error executing command in container: "
        "failed to exec in container: failed to start exec "
    )
    assert status["message"].endswith(
        "OCI runtime exec failed: exec failed: unable to start container process: "
        'exec: "no-such-binary-xyz": executable file not found in $PATH: unknown'
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("abort", [False, True], ids=["closed", "dropped"])
async def test_client_leaving_leaves_the_command_running_until_it_ends(
    app: ExecApp, abort: bool
) -> None:
    # containerd's streaming exec has no timeout and ignores its client going away
    # (streamRuntime.Exec runs execInContainer with a context nothing cancels): the
    # command runs to its end. Before issue 23 the sim killed it here.
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(
            app.exec_url("sh", "-c", "echo $$; sleep 1; echo done >&2; touch ended"),
            protocols=(V5,),
        ) as ws,
    ):
        await ws.receive()  # the empty frame
        msg = await ws.receive()
        pid = int(msg.data[1:])
        if abort:
            assert ws._response is not None
            ws._response.connection.transport.abort()  # type: ignore[union-attr]
    assert len(app.sessions) == 1  # the session lasts as long as its command
    assert alive(pid)
    async with asyncio.timeout(10):
        await app.finished.get()  # the command ended by itself, its output dropped
    assert not alive(pid)
    assert len(app.sessions) == 0
    assert [p.name for p in app.workdir_root.rglob("ended")] == ["ended"]  # ran to its end


async def test_unregistered_container_falls_back_to_subprocess(app: ExecApp) -> None:
    register(app, ExecReply(0, stdout=b"handler"))
    app.registry.unregister("default", "web-0", "app")
    s = await run_exec(app, "echo", "subprocess")
    assert s.channels[1] == b"subprocess\n"


# --- refusals ----------------------------------------------------------------


async def test_v5_not_running_container_fails_after_upgrade(app: ExecApp) -> None:
    app.pod = make_pod(running=False)
    s = await run_exec(app, "x")
    assert s.status == {
        "metadata": {},
        "status": "Failure",
        "message": 'Internal error occurred: unable to upgrade connection: container not found ("app")',
        "reason": "InternalError",
        "details": {
            "causes": [{"message": 'unable to upgrade connection: container not found ("app")'}]
        },
        "code": 500,
    }


async def test_v4_not_running_container_is_the_kubelets_http_error(app: ExecApp) -> None:
    app.pod = make_pod(running=False)
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
            await http.ws_connect(app.exec_url("x"), protocols=(V4,))
    assert err.value.status == 500


@pytest.mark.parametrize(
    ("containers", "init", "container", "message"),
    [
        pytest.param(("app",), (), None, None, id="single-container-defaults"),
        pytest.param(
            ("app",), (), "nope", "container nope is not valid for pod web-0", id="unknown"
        ),
        pytest.param(("a", "b"), (), "b", None, id="named"),
        pytest.param(("a",), ("init",), "init", None, id="init-container-is-valid"),
        pytest.param(
            ("a", "b"),
            ("i",),
            None,
            "a container name must be specified for pod web-0, choose one of: [a b] "
            "or one of the init containers: [i]",
            id="ambiguous",
        ),
    ],
)
def test_exec_target_error(
    containers: tuple[str, ...], init: tuple[str, ...], container: str | None, message: str | None
) -> None:
    pod = make_pod(containers=containers)
    pod["spec"]["initContainers"] = [{"name": n} for n in init]
    err = exec_target_error(pod, container)
    assert (err.message if err else None) == message
    if err is not None:
        assert err.code == 400
        assert err.reason == "BadRequest"


def test_pod_without_node_is_refused() -> None:
    pod = make_pod()
    del pod["spec"]["nodeName"]
    err = exec_target_error(pod, None)
    assert err is not None
    assert err.message == "pod web-0 does not have a host assigned"


# --- faults ------------------------------------------------------------------


async def test_break_fault_drops_the_connection_without_status(app: ExecApp) -> None:
    app.faults.break_after_bytes = 10
    register(app, ExecReply(0, stdout=b"0123456789abcdef"))
    s = await run_exec(app, "x")
    assert s.channels[1] == b"0123456789"
    assert 3 not in s.channels
    assert not s.closed_cleanly


async def test_stall_fault_upgrades_and_never_answers(app: ExecApp) -> None:
    app.faults.stall = True
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(app.exec_url("x"), protocols=(V5,)) as ws,
    ):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(ws.receive(), 0.2)  # proving a silence needs a bound
    await asyncio.wait_for(app.finished.get(), 5)  # the handler ends when the client leaves


async def test_reject_fault_answers_with_status(app: ExecApp) -> None:
    app.faults.reject_status = 429
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
            await http.ws_connect(app.exec_url("x"), protocols=(V5,))
    assert err.value.status == 429
    assert err.value.headers is not None
    assert err.value.headers["Retry-After"] == "1"


# --- pure pieces ---------------------------------------------------------------


def test_query_flags_follow_apimachinery_conversion() -> None:
    from multidict import MultiDict

    opts = parse_exec_options(
        MultiDict(
            [("command", "a"), ("command", "b"), ("stdin", ""), ("stdout", "0"), ("tty", "FALSE")]
        )
    )
    assert opts.command == ("a", "b")
    assert opts.stdin
    assert not opts.stdout
    assert not opts.stderr
    assert not opts.tty


def test_status_json_is_escaped_like_go() -> None:
    assert go_json({"message": "<a&b>"}) == b'{"message":"\\u003ca\\u0026b\\u003e"}'


def test_build_exec_target_reads_running_state(tmp_path: Path) -> None:
    target = build_exec_target(make_pod(running=False), None, workdir_root=tmp_path)
    assert not target.running
    assert target.env["GREETING"] == "hello"
    assert target.env["POD"] == "web-0"
    assert target.workdir == tmp_path / "uid-1" / "app"


# --- kubernetes_asyncio ----------------------------------------------------------


async def test_kubernetes_asyncio_ws_client_reads_output(app: ExecApp) -> None:
    from kubernetes_asyncio.client import Configuration, CoreV1Api
    from kubernetes_asyncio.stream import WsApiClient

    register(app, ExecReply(0, stdout=b"from-handler\n"))
    config = Configuration(host=app.url.split("/api/")[0])
    async with WsApiClient(configuration=config) as api_client:
        core: Callable[..., Awaitable[Any]] = CoreV1Api(api_client).connect_get_namespaced_pod_exec
        output = await core("web-0", "default", command=["probe"], stdout=True, stderr=True)
    assert output == "from-handler\n"


async def test_pre_v4_protocol_writes_only_a_failure_message(app: ExecApp) -> None:
    register(app, ExecReply(0, stdout=b"ok"))
    ok = await run_exec(app, "x", protocols=("channel.k8s.io",))
    register(app, ExecReply(1))
    failed = await run_exec(app, "x", protocols=())
    assert ok.channels[1] == b"ok"
    assert 3 not in ok.channels
    assert failed.protocol is None
    assert failed.channels[3] == (
        b"command terminated with non-zero exit code: error executing command [x], exit code 1"
    )


async def test_v4_stdin_left_open_does_not_outlive_the_process(app: ExecApp) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(app.exec_url("sh", "-c", "exit 0", stdin="1"), protocols=(V4,)) as ws,
    ):
        await ws.send_bytes(b"\x00unread")  # v4 has no way to close stdin
        await ws.send_bytes(b'\x04{"Width":80,"Height":24}')  # resize frames are ignored
        s = await collect(ws)
    assert s.status == SUCCESS


async def test_break_fault_on_a_subprocess_stream(app: ExecApp) -> None:
    app.faults.break_after_bytes = 100
    s = await run_exec(app, "sh", "-c", "echo $$; exec head -c 1000000 /dev/zero")
    await app.finished.get()
    pid, zeros = s.channels[1].split(b"\n", 1)
    assert zeros == b"\0" * (100 - len(pid) - 1)
    assert 3 not in s.channels
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)


async def test_client_leaving_a_flooding_process_leaves_it_running_until_close_all(
    app: ExecApp,
) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(app.exec_url("sh", "-c", "echo $$; exec yes"), protocols=(V5,)) as ws,
    ):
        await ws.receive()  # the empty frame
        msg = await ws.receive()
        pid = int(msg.data[1:].split(b"\n", 1)[0])
    await asyncio.sleep(0.2)  # writes to the gone client are dropped, not fatal
    assert alive(pid)
    assert await app.sessions.close_all() == 1  # the server going away ends it
    await app.finished.get()
    assert not alive(pid)


async def test_close_all_ends_running_and_stalled_sessions(app: ExecApp) -> None:
    async with aiohttp.ClientSession() as http:
        running = await http.ws_connect(
            app.exec_url("sh", "-c", "echo $$; exec sleep 30"), protocols=(V5,)
        )
        await running.receive()  # the empty frame
        pid = int((await running.receive()).data[1:])
        app.faults.stall = True
        stalled = await http.ws_connect(app.exec_url("x"), protocols=(V5,), autoping=False)
        await stalled.ping()
        assert (await stalled.receive()).type is WSMsgType.PONG  # its reader is running
        assert await app.sessions.close_all() == 2
        assert (await running.receive()).type is WSMsgType.CLOSE
        assert (await stalled.receive()).type is WSMsgType.CLOSE
        await running.close()
        await stalled.close()
    await app.finished.get()
    await app.finished.get()
    assert len(app.sessions) == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
