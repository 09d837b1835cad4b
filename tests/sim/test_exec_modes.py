"""The ways real servers end and word an exec, as the sim plays them, seen by a raw client.

- v5: a 1.30+ API server's stream translator (rebuilt exit Status, doubled
  "Internal error occurred" for runtime errors, upgrade before the kubelet refuses);
- a v4-only offer: passed through to the kubelet (its own wording, plain-text refusals);
- `drop_after_close` / `drop_after_status`: the server drops TCP after the status
  without waiting for the client's close;
- stream handlers that write exact frames, and `ExecSessions.wait_idle`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from aiohttp import WSMsgType
from kubernetes_asyncio import client

from probemarker.sim import SimCluster
from probemarker.sim.exec.plan import ExecFaults
from probemarker.sim.exec.runners import ExecIO, ExecReply, ExecRequest
from probemarker.sim.server.harness.faults import Faults
from tests.sim.server_helpers import pod_manifest

V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
MISSING = "error executing command in container: failed to exec in container: failed to start exec "
MISSING_END = (
    "OCI runtime exec failed: exec failed: unable to start container process: "
    'exec: "no-such-binary-xyz": executable file not found in $PATH: unknown'
)


@pytest.fixture
async def pod(sim: SimCluster, core: client.CoreV1Api) -> SimCluster:
    await core.create_namespaced_pod("default", pod_manifest("p"))  # type: ignore[arg-type]
    await sim.kubelet.wait_running("default", "p")
    return sim


def exec_url(sim: SimCluster, *command: str) -> str:
    query = [("command", c) for c in command] + [("stdout", "true"), ("stderr", "true")]
    return f"{sim.url}/api/v1/namespaces/default/pods/p/exec?{urlencode(query)}"


@dataclass
class Seen:
    """What a raw client saw: data frames, then how the connection ended."""

    protocol: str | None
    frames: list[tuple[int, bytes]]
    ending: list[tuple[WSMsgType, Any]]
    close_code: int | None

    @property
    def status(self) -> Any:
        return json.loads(b"".join(d for ch, d in self.frames if ch == 3))


async def converse(sim: SimCluster, *command: str, protocols: tuple[str, ...] = (V5,)) -> Seen:
    """Read every frame without ever sending a close frame (autoclose off)."""
    frames: list[tuple[int, bytes]] = []
    ending: list[tuple[WSMsgType, Any]] = []
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(exec_url(sim, *command), protocols=protocols, autoclose=False) as ws,
    ):
        while True:
            msg = await ws.receive()
            if msg.type is WSMsgType.BINARY:
                frames.append((msg.data[0], msg.data[1:]))
                continue
            ending.append((msg.type, msg.data))
            if msg.type is not WSMsgType.CLOSE:
                break
        return Seen(ws.protocol, frames, ending, ws.close_code)


# --- how a session ends ---------------------------------------------------------------


async def test_normal_end_waits_for_the_clients_close(pod: SimCluster) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(exec_url(pod, "true"), protocols=(V5,), autoclose=False) as ws,
    ):
        while (msg := await ws.receive()).type is WSMsgType.BINARY:
            pass
        assert (msg.type, msg.data) == (WSMsgType.CLOSE, 1000)
        assert pod.server is not None
        assert len(pod.server.exec_sessions) == 1  # still waiting for our close
        await ws.close()
    async with asyncio.timeout(5):
        await pod.server.exec_sessions.wait_idle()


async def test_drop_after_close_sends_close_frame_then_drops_tcp(pod: SimCluster) -> None:
    pod.faults.exec.drop_after_close = True
    seen = await converse(pod, "sh", "-c", "echo hi; exit 3")
    assert seen.frames[-1][0] == 3
    assert seen.status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    # The close frame, then the connection gone although we never answered it.
    assert seen.ending[0] == (WSMsgType.CLOSE, 1000)
    assert seen.ending[1][0] is WSMsgType.CLOSED


async def test_drop_after_status_ends_without_close_frame(pod: SimCluster) -> None:
    pod.faults.exec.drop_after_status = True
    seen = await converse(pod, "sh", "-c", "exit 0")
    assert seen.status == {"metadata": {}, "status": "Success"}
    assert [kind for kind, _ in seen.ending] == [WSMsgType.CLOSED]
    assert seen.close_code == 1006


def test_reset_and_clear_switch_every_exec_fault_off() -> None:
    faults = Faults()
    on = ExecFaults(
        break_after_bytes=1,
        stall=True,
        reject_status=403,
        drop_after_close=True,
        drop_after_status=True,
        start_delay=1.0,
    )
    faults.exec = on
    faults.clear()
    assert faults.exec is on
    assert faults.exec == ExecFaults()


# --- v5 through the translator, v4 through to the kubelet -----------------------------------


async def test_v5_rebuilds_the_exit_status(pod: SimCluster) -> None:
    seen = await converse(pod, "sh", "-c", "exit 3")
    assert seen.protocol == V5
    # streamtranslator.go codeExitToStatusError around client-go's CodeExitError.
    assert seen.status == {
        "metadata": {},
        "status": "Failure",
        "message": "command terminated with non-zero exit code: command terminated with exit code 3",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
    }


async def test_v4_only_offer_is_passed_through_to_the_kubelet(pod: SimCluster) -> None:
    seen = await converse(pod, "sh", "-c", "exit 3", protocols=(V4,))
    assert seen.protocol == V4
    assert seen.status["message"] == (
        "command terminated with non-zero exit code: error executing command "
        "[sh -c exit 3], exit code 3"
    )


@pytest.mark.parametrize(
    ("protocols", "prefix"),
    [
        # The kubelet's NewInternalError, decoded by the API server's SPDY client
        # (errors.New(status.Message)) and wrapped in its own NewInternalError.
        pytest.param((V5,), "Internal error occurred: Internal error occurred: ", id="v5"),
        pytest.param((V4,), "Internal error occurred: ", id="v4"),
    ],
)
async def test_missing_executable_text(
    pod: SimCluster, protocols: tuple[str, ...], prefix: str
) -> None:
    status = (await converse(pod, "no-such-binary-xyz", protocols=protocols)).status
    assert status["reason"] == "InternalError"
    assert status["code"] == 500
    assert status["message"].startswith(prefix + MISSING)
    assert status["message"].endswith(MISSING_END)
    assert status["details"]["causes"] == [
        {"message": status["message"][len("Internal error occurred: ") :]}
    ]


async def test_container_not_running_v5_status_v4_refusal(pod: SimCluster) -> None:
    pod.kubelet.stop_container("default", "p", "app", exit_code=1)
    status = (await converse(pod, "true")).status
    assert status["message"] == (
        'Internal error occurred: unable to upgrade connection: container not found ("app")'
    )
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
            await http.ws_connect(exec_url(pod, "true"), protocols=(V4,))
        assert err.value.status == 500
        async with http.get(
            exec_url(pod, "true"),
            headers={
                "Upgrade": "websocket",
                "Connection": "Upgrade",
                "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                "Sec-WebSocket-Protocol": V4,
            },
        ) as response:
            assert response.status == 500
            assert await response.text() == 'container not found ("app")'


# --- handlers and sessions -------------------------------------------------------------


async def test_stream_handler_writes_exact_frames(pod: SimCluster) -> None:
    async def handler(request: ExecRequest, io: ExecIO) -> int:
        await io.write_stdout(b"a\xc3")
        await io.write_stdout(b"\xa9")
        await io.write_stderr(b"e")
        return 256 + 5  # exit codes are a byte, as runc reports them

    pod.exec_handlers.register_stream("default", "p", "app", handler)
    seen = await converse(pod, "anything")
    assert seen.frames[:4] == [(1, b""), (1, b"a\xc3"), (1, b"\xa9"), (2, b"e")]
    assert seen.status["details"]["causes"][0]["message"] == "5"


async def test_registering_one_kind_of_handler_replaces_the_other(pod: SimCluster) -> None:
    async def stream(request: ExecRequest, io: ExecIO) -> int:
        await io.write_stdout(b"stream")
        return 0

    async def reply(request: ExecRequest) -> ExecReply:
        return ExecReply(0, stdout=b"reply")

    handlers = pod.exec_handlers
    handlers.register_stream("default", "p", "app", stream)
    handlers.register("default", "p", "app", reply)
    assert (await converse(pod, "x")).frames[1] == (1, b"reply")
    handlers.register_stream("default", "p", "app", stream)
    assert (await converse(pod, "x")).frames[1] == (1, b"stream")
    handlers.unregister("default", "p", "app")
    assert (await converse(pod, "echo", "sub")).frames[1] == (1, b"sub\n")


async def test_wait_idle_returns_once_every_session_ended(pod: SimCluster) -> None:
    assert pod.server is not None
    sessions = pod.server.exec_sessions
    await asyncio.wait_for(sessions.wait_idle(), 1)  # nothing open: at once
    release = asyncio.Event()

    async def hold(request: ExecRequest, io: ExecIO) -> int:
        await io.write_stdout(b"started")
        await release.wait()
        return 0

    pod.exec_handlers.register_stream("default", "p", "app", hold)
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(exec_url(pod, "x"), protocols=(V5,)) as ws,
    ):
        assert (await ws.receive()).data == b"\x01"
        assert (await ws.receive()).data == b"\x01started"
        idle = asyncio.create_task(sessions.wait_idle())
        await asyncio.sleep(0)
        assert not idle.done()
        release.set()
        async for _ in ws:
            pass
    async with asyncio.timeout(5):
        await idle
    assert len(sessions) == 0
