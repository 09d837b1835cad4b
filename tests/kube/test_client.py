"""The client edge against the sim over real HTTP and HTTPS: answers, errors, deadlines."""

from __future__ import annotations

import asyncio
import asyncio.sslproto

import orjson
import pytest

from probemarker.kube.connect.client import ClientSettings, KubeClient
from probemarker.kube.connect.config import load_kubeconfig
from probemarker.kube.connect.errors import (
    ApiBadRequest,
    ApiConflict,
    ApiForbidden,
    ApiGone,
    ApiInvalid,
    ApiMalformed,
    ApiNotFound,
    ApiServerError,
    ApiTimeout,
    ApiTooManyRequests,
    ApiUnauthorized,
    ApiUnreachable,
    RequestInfo,
)
from probemarker.sim import SimCluster

LIST = RequestInfo("list", "pods", namespace="default")
PODS = "/api/v1/namespaces/default/pods"


def pod(name: str, **annotations: str) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "busybox"}]},
        }
    )


async def create(client: KubeClient, body: bytes) -> dict[str, object]:
    return await client.request(
        "POST",
        PODS,
        info=RequestInfo("create", "pods", namespace="default"),
        body=body,
        content_type="application/json",
    )


async def test_request_returns_parsed_json(client: KubeClient) -> None:
    await create(client, pod("a"))
    listed = await client.request("GET", PODS, info=LIST)
    assert listed["kind"] == "PodList"
    assert client.requests == {("create", "pods", 201): 1, ("list", "pods", 200): 1}
    assert [p["metadata"]["name"] for p in listed["items"]] == ["a"]  # type: ignore[index]


async def test_list_page_hands_out_each_item_and_returns_the_rest(client: KubeClient) -> None:
    for name in ("a", "b", "c"):
        await create(client, pod(name, note="n" * 10_000))
    seen: list[str] = []
    rest = await client.list_page(
        PODS, info=LIST, item=lambda obj: seen.append(obj["metadata"]["name"])
    )
    assert seen == ["a", "b", "c"]
    assert rest["kind"] == "PodList"
    assert rest["items"] == []
    assert rest["metadata"]["resourceVersion"]  # type: ignore[index]
    assert client.requests[("list", "pods", 200)] == 1


async def test_a_failing_item_ends_the_list_and_the_client_goes_on(client: KubeClient) -> None:
    await create(client, pod("a"))

    def refuse(obj: dict[str, object]) -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await client.list_page(PODS, info=LIST, item=refuse)
    listed = await client.request("GET", PODS, info=LIST)
    assert len(listed["items"]) == 1  # type: ignore[arg-type]


async def test_https_with_token(tls_client: KubeClient) -> None:
    created = await create(tls_client, pod("a"))
    assert created["metadata"]["uid"]  # type: ignore[index]


async def test_a_tls_connection_reads_into_64_kib_not_256(tls_client: KubeClient) -> None:
    """asyncio zero-fills a read buffer of SSLProtocol.max_size for every TLS connection
    (256 KiB); the daemon holds up to a hundred connections (issue 22)."""
    assert asyncio.sslproto.SSLProtocol.max_size == 64 << 10
    note = "n" * 200_000  # an answer bigger than the buffer still arrives whole
    created = await create(tls_client, pod("big", note=note))
    assert created["metadata"]["annotations"] == {"note": note}  # type: ignore[index]
    listed = await tls_client.request("GET", PODS, info=LIST)
    assert listed["items"][0]["metadata"]["annotations"]["note"] == note  # type: ignore[index]


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        pytest.param(400, ApiBadRequest, id="400"),
        pytest.param(401, ApiUnauthorized, id="401"),
        pytest.param(403, ApiForbidden, id="403"),
        pytest.param(404, ApiNotFound, id="404"),
        pytest.param(409, ApiConflict, id="409"),
        pytest.param(410, ApiGone, id="410"),
        pytest.param(422, ApiInvalid, id="422"),
        pytest.param(429, ApiTooManyRequests, id="429"),
        pytest.param(500, ApiServerError, id="500"),
        pytest.param(503, ApiServerError, id="503"),
    ],
)
async def test_each_status_maps_to_its_error(
    sim: SimCluster, client: KubeClient, code: int, cls: type
) -> None:
    sim.faults.fail_requests(code=code, verb="list", resource="pods", retry_after=2)
    with pytest.raises(cls) as caught:
        await client.request("GET", PODS, info=LIST)
    assert caught.value.code == code
    assert client.requests[("list", "pods", code)] == (2 if code == 401 else 1)
    if code in (429, 503):
        assert caught.value.retry_after == 2.0


async def test_forbidden_names_verb_resource_and_namespace(
    sim: SimCluster, client: KubeClient
) -> None:
    sim.faults.fail_requests(code=403, verb="patch", resource="pods", subresource="status")
    info = RequestInfo("patch", "pods", namespace="default", name="a", subresource="status")
    with pytest.raises(ApiForbidden) as caught:
        await client.request(
            "PATCH",
            f"{PODS}/a/status",
            info=info,
            body=b"[]",
            content_type="application/json-patch+json",
        )
    text = str(caught.value)
    assert 'cannot patch resource "pods/status" in API group "" in the namespace "default"' in text
    assert "needs verb 'patch' on 'pods/status' in namespace 'default'" in text


async def test_deadline_on_a_slow_answer(sim: SimCluster, client: KubeClient) -> None:
    sim.faults.add_latency(10.0, verb="list", resource="pods")
    with pytest.raises(ApiTimeout):
        await client.request("GET", PODS, info=LIST, wait=0.3)


async def test_server_down_is_unreachable(sim: SimCluster, client: KubeClient) -> None:
    await sim.faults.take_down()
    try:
        with pytest.raises(ApiUnreachable) as caught:
            await client.request("GET", PODS, info=LIST)
        assert not isinstance(caught.value, ApiTimeout)
    finally:
        await sim.faults.bring_up()
    await client.request("GET", PODS, info=LIST)  # and back


async def test_stream_read_deadline_detects_silence(client: KubeClient) -> None:
    params = {"watch": "1", "resourceVersion": "0", "timeoutSeconds": "60"}
    async with client.stream_lines(PODS, info=LIST, params=params, read_timeout=0.3) as lines:
        with pytest.raises(ApiTimeout):
            async for _ in lines:
                pass


async def test_stream_error_status_raises_before_lines(sim: SimCluster, client: KubeClient) -> None:
    sim.faults.fail_requests(code=410, verb="watch", resource="pods")
    with pytest.raises(ApiGone):
        async with client.stream_lines(
            PODS, info=LIST, params={"watch": "1", "resourceVersion": "1"}, read_timeout=5
        ):
            pass


async def test_stream_lines_longer_than_aiohttp_line_limit(client: KubeClient) -> None:
    big = "x" * (200 << 10)  # aiohttp's readline would refuse a line this long
    await create(client, pod("big", note=big))
    await create(client, pod("small"))
    params = {"watch": "1", "resourceVersion": "0", "timeoutSeconds": "1"}
    names = []
    async with client.stream_lines(PODS, info=LIST, params=params, read_timeout=5) as lines:
        async for line in lines:
            obj = orjson.loads(line)["object"]
            names.append(obj["metadata"]["name"])
            if obj["metadata"]["name"] == "big":
                assert obj["metadata"]["annotations"]["note"] == big
    assert names == ["big", "small"]


async def test_stream_line_cap_is_a_clear_error(sim: SimCluster) -> None:
    settings = ClientSettings(max_line_bytes=64 << 10)
    async with KubeClient(await load_kubeconfig(sim.kubeconfig_path), settings=settings) as client:
        await create(client, pod("big", note="x" * (200 << 10)))
        params = {"watch": "1", "resourceVersion": "0", "timeoutSeconds": "5"}
        async with client.stream_lines(PODS, info=LIST, params=params, read_timeout=5) as lines:
            with pytest.raises(ApiMalformed, match="longer than 65536 bytes"):
                async for _ in lines:
                    pass


async def exec_once(client: KubeClient) -> None:
    info = RequestInfo("get", "pods", namespace="default", name="a", subresource="exec")
    params = [("command", "true"), ("container", "app"), ("stdout", "true"), ("stderr", "true")]
    async with client.websocket(
        f"{PODS}/a/exec", info=info, params=params, protocols=["v5.channel.k8s.io"], wait=5
    ) as ws:
        while not hasattr(await ws.receive(), "code"):
            pass


async def wait_running(client: KubeClient, name: str) -> None:
    """Watch the pod until the sim's kubelet reports it Running."""
    params = {"watch": "1", "fieldSelector": f"metadata.name={name}", "resourceVersion": "0"}
    async with (
        asyncio.timeout(10),
        client.stream_lines(PODS, info=LIST, params=params, read_timeout=10) as lines,
    ):
        async for line in lines:
            if orjson.loads(line)["object"]["status"].get("phase") == "Running":
                return


@pytest.mark.parametrize("resume", [True, False], ids=["resumption", "full-handshakes"])
async def test_tls_session_resumption_for_websockets(tls_sim: SimCluster, resume: bool) -> None:
    connection = await load_kubeconfig(tls_sim.kubeconfig_path)
    async with KubeClient(connection, settings=ClientSettings(tls_resumption=resume)) as client:
        await create(client, pod("a"))
        await wait_running(client, "a")
        for _ in range(4):
            await exec_once(client)
        if resume:
            assert client.tls_sessions.offered >= 3
            assert client.tls_sessions.collected >= 1
        else:
            assert client.tls_sessions.offered == 0


async def test_websocket_handshake_refused_maps_status(sim: SimCluster, client: KubeClient) -> None:
    await create(client, pod("a"))
    sim.faults.exec.reject_status = 403
    with pytest.raises(ApiForbidden):
        await exec_once(client)


async def test_client_must_be_opened(sim: SimCluster) -> None:
    client = KubeClient(await load_kubeconfig(sim.kubeconfig_path))
    with pytest.raises(RuntimeError, match="async with KubeClient"):
        await client.request("GET", PODS, info=LIST)
