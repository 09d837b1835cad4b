"""pods/exec through the server: routing to the exec engine, handlers, working directories, refusals."""

from __future__ import annotations

import asyncio

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.stream import WsApiClient

from probemarker.sim import SimCluster
from probemarker.sim.exec.runners import ExecReply, ExecRequest
from tests.sim.server_helpers import pod_manifest, raw


async def test_exec_with_kubernetes_asyncio_subprocess_and_handler(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod(
        "default",
        pod_manifest(
            "x",
            containers=[
                {"name": "app", "image": "busybox", "env": [{"name": "GREETING", "value": "hi"}]}
            ],
        ),
    )
    await sim.kubelet.wait_running("default", "x")
    seen: list[ExecRequest] = []

    async def handler(request: ExecRequest) -> ExecReply:
        seen.append(request)
        return ExecReply(exit_code=0, stdout=b"from handler")

    async with WsApiClient(sim.configuration()) as ws:
        streaming = client.CoreV1Api(ws)
        out = await streaming.connect_get_namespaced_pod_exec(
            "x",
            "default",
            command=["sh", "-c", "echo $GREETING-$(basename $PWD)"],
            stdout=True,
            stderr=True,
            stdin=False,
            tty=False,
        )
        assert out.strip() == "hi-app"
        sim.exec_handlers.register("default", "x", "app", handler)
        out = await streaming.connect_get_namespaced_pod_exec(
            "x", "default", command=["probe"], stdout=True, stderr=True, stdin=False, tty=False
        )
        assert out == "from handler"
    assert [r.command for r in seen] == [("probe",)]
    assert seen[0].target.env["GREETING"] == "hi"
    assert sim.accounting.count(resource="pods", subresource="exec") == 2


async def test_exec_refusals_are_status_objects(sim: SimCluster, core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("pending", node=None))
    status, body = await raw(
        sim, "GET", "/api/v1/namespaces/default/pods/pending/exec?command=true&stdout=1"
    )
    assert (status, body["reason"]) == (400, "BadRequest")
    assert body["message"] == "pod pending does not have a host assigned"
    status, body = await raw(
        sim, "GET", "/api/v1/namespaces/default/pods/nope/exec?command=true&stdout=1"
    )
    assert (status, body["message"]) == (404, 'pods "nope" not found')


async def test_exec_faults_are_reachable_through_sim_faults(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod("default", pod_manifest("f"))
    await sim.kubelet.wait_running("default", "f")
    sim.faults.exec.reject_status = 503
    status, body = await raw(
        sim, "GET", "/api/v1/namespaces/default/pods/f/exec?command=true&stdout=1"
    )
    assert status == 503
    assert body["kind"] == "Status"
    sim.faults.clear()
    assert sim.faults.exec.reject_status is None


async def test_shutdown_closes_a_stalled_exec_session() -> None:
    cluster = SimCluster()
    await cluster.__aenter__()
    try:
        async with client.ApiClient(cluster.configuration()) as api:
            await client.CoreV1Api(api).create_namespaced_pod("default", pod_manifest("s"))
        await cluster.kubelet.wait_running("default", "s")
        cluster.faults.exec.stall = True
        async with aiohttp.ClientSession() as session:
            url = f"{cluster.url}/api/v1/namespaces/default/pods/s/exec?command=true&stdout=1"
            ws = await session.ws_connect(url, protocols=("v5.channel.k8s.io",))
            assert len(cluster.server.exec_sessions) == 1
            async with asyncio.timeout(10):  # a hang detector, not a performance bound
                await cluster.__aexit__(None, None, None)
                message = await ws.receive()
            # Closed by the server as it goes away, not dropped by a shutdown timeout.
            assert message.type == aiohttp.WSMsgType.CLOSE
            assert message.data == aiohttp.WSCloseCode.GOING_AWAY
    finally:
        await cluster.__aexit__(None, None, None)
