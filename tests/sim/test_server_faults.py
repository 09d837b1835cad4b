"""Fault injection and request accounting."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from probemarker.sim import SimCluster
from tests.sim.server_helpers import pod_manifest

PODS = "/api/v1/namespaces/default/pods"


async def test_accounting_counts_by_verb_resource_subresource_and_code(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod("default", pod_manifest("acc", node=None))
    await core.read_namespaced_pod("acc", "default")
    await core.list_namespaced_pod("default")
    await core.patch_namespaced_pod_status(
        "acc", "default", [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    )
    with pytest.raises(ApiException):
        await core.read_namespaced_pod("missing", "default")
    await core.delete_namespaced_pod("acc", "default")
    count = sim.accounting.count
    assert count(verb="create", resource="pods", code=201) == 1
    assert count(verb="get", resource="pods", code=200) == 1
    assert count(verb="get", resource="pods", code=404) == 1
    assert count(verb="list", resource="pods") == 1
    assert count(verb="patch", resource="pods", subresource="status") == 1
    assert count(verb="patch", resource="pods", subresource="") == 0
    assert count(verb="delete", resource="pods") == 1
    assert sim.accounting.counts()[("get", "pods", "", 404)] == 1
    sim.accounting.reset()
    assert len(sim.accounting) == 0


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (400, "BadRequest"),
        (401, "Unauthorized"),
        (403, "Forbidden"),
        (404, "NotFound"),
        (409, "Conflict"),
        (410, "Expired"),
        (422, "Invalid"),
        (429, "TooManyRequests"),
        (500, "InternalError"),
        (503, "ServiceUnavailable"),
    ],
)
async def test_injected_failures(sim: SimCluster, code: int, reason: str) -> None:
    sim.faults.fail_requests(code=code, verb="list", resource="pods", retry_after=2, times=1)
    async with aiohttp.ClientSession() as session:
        async with session.get(sim.url + PODS) as response:
            assert response.status == code
            body = await response.json()
            assert body["reason"] == reason
            if code == 429:
                assert response.headers["Retry-After"] == "2"
                assert body["details"]["retryAfterSeconds"] == 2
        async with session.get(sim.url + PODS) as response:
            assert response.status == 200
        async with session.get(sim.url + "/api/v1/namespaces") as response:
            assert response.status == 200
    assert sim.accounting.count(verb="list", resource="pods", code=code) == 1


async def test_injected_forbidden_has_the_authorizers_text(sim: SimCluster) -> None:
    sim.faults.fail_requests(code=403, verb="patch", resource="pods", subresource="status")
    async with (
        aiohttp.ClientSession() as session,
        session.patch(
            sim.url + PODS + "/gs-1/status",
            data=b"[]",
            headers={"Content-Type": "application/json-patch+json"},
        ) as response,
    ):
        body = await response.json()
    assert response.status == 403
    assert body["message"] == (
        'pods "gs-1" is forbidden: User "sim-user" cannot patch resource "pods/status" '
        'in API group "" in the namespace "default"'
    )


def test_fault_codes_are_checked() -> None:
    from probemarker.sim.server.harness.faults import Faults

    with pytest.raises(ValueError, match="code must be one of"):
        Faults().fail_requests(code=418)


async def test_tokens_change_at_run_time() -> None:
    async with SimCluster(token="one") as sim, aiohttp.ClientSession() as session:
        sim.set_tokens("two")
        for token, code in (("one", 401), ("two", 200), ("", 401)):
            headers = {"Authorization": f"Bearer {token}"}
            async with session.get(sim.url + PODS, headers=headers) as response:
                assert response.status == code, token
        async with session.get(sim.url + PODS, headers={"Authorization": "two"}) as response:
            assert response.status == 401  # the scheme is required


async def test_share_of_failures_is_partial(sim: SimCluster) -> None:
    sim.faults.fail_requests(code=503, share=0.5, verb="get")
    codes = []
    async with aiohttp.ClientSession() as session:
        for _ in range(40):
            async with session.get(sim.url + "/api/v1/namespaces/default") as response:
                codes.append(response.status)
    assert 0 < codes.count(503) < 40
    sim.faults.clear()


async def test_latency_is_added(sim: SimCluster) -> None:
    sim.faults.add_latency(0.2, verb="get", resource="namespaces")
    async with aiohttp.ClientSession() as session:
        started = time.monotonic()
        async with session.get(sim.url + "/api/v1/namespaces/default") as response:
            assert response.status == 200
        assert time.monotonic() - started >= 0.2


async def test_api_server_down_then_up_on_the_same_port(sim: SimCluster) -> None:
    url = sim.url
    await sim.faults.take_down()
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectionError):
            async with session.get(url + "/version"):
                pass
        await sim.faults.bring_up()
        assert sim.url == url
        async with session.get(url + "/version") as response:
            assert response.status == 200


async def test_outage_closes_open_watches(sim: SimCluster) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            sim.url + PODS,
            params={"watch": "1", "resourceVersion": str(sim.store.resource_version)},
        ) as response,
    ):
        assert response.status == 200
        async with asyncio.TaskGroup() as group:
            group.create_task(sim.faults.outage(0.1))
            with pytest.raises(aiohttp.ClientPayloadError):
                await response.content.read()
    assert not sim.faults.down


async def test_close_watches_ends_streams_cleanly(sim: SimCluster) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            sim.url + PODS,
            params={"watch": "1", "resourceVersion": str(sim.store.resource_version)},
        ) as response,
    ):
        assert sim.faults.close_watches() == 1
        assert await response.content.read() == b""


def test_share_rules_on_one_verb_add_up() -> None:
    from probemarker.sim.server.harness.faults import Faults, RequestKey

    faults = Faults(seed=1)
    first = faults.fail_requests(code=429, share=0.5, verb="list")
    second = faults.fail_requests(code=500, share=0.5, verb="list")
    key = RequestKey("list", "pods", "")
    failed = sum(faults.failure_for(key) is not None for _ in range(4000))
    assert 2800 < failed < 3200  # 1 - 0.5 * 0.5 = 75%
    assert first.fired > 0
    assert second.fired > 0
