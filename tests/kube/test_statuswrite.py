"""JSON patches to pods/status against the sim, over HTTP and over HTTPS with a token.

A patch that applies; a failed `test` (and a path gone) -> ApiPatchTestFailed with
nothing changed; a stale resourceVersion and an injected 409 -> ApiConflict; 429 with
its Retry-After; each call takes a token of the shared bucket before it is sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import orjson
import pytest

from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import load_kubeconfig
from probemarker.kube.connect.errors import (
    ApiConflict,
    ApiInvalid,
    ApiNotFound,
    ApiPatchTestFailed,
    ApiServerError,
    ApiTooManyRequests,
    RequestInfo,
    error_from_response,
)
from probemarker.kube.write.ratelimit import TokenBucket
from probemarker.kube.write.statuswrite import patch_pod_status
from probemarker.sim import SimCluster
from probemarker.sim.server.discovery.catalog import PODS
from tests.fakes import FakeClock, until
from tests.kube.conftest import TOKEN

NS = "default"
PROBE_CONDITION = "probemarker.io/idle"


@dataclass(frozen=True, slots=True)
class Env:
    sim: SimCluster
    client: KubeClient
    limiter: TokenBucket

    def stored(self, name: str) -> dict[str, Any]:
        return self.sim.store.get(PODS, NS, name)

    async def patch(self, name: str, ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return await patch_pod_status(
            self.client, namespace=NS, name=name, ops=ops, limiter=self.limiter
        )


@pytest.fixture(params=["http", "https-token"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[Env]:
    options: dict[str, Any] = {"https": True, "token": TOKEN} if request.param != "http" else {}
    async with (
        SimCluster(node_names=("node-1",), **options) as sim,
        KubeClient(await load_kubeconfig(sim.kubeconfig_path)) as client,
    ):
        yield Env(sim, client, TokenBucket(qps=100.0, burst=100))


async def running_pod(env: Env, name: str = "gs-1") -> dict[str, Any]:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "game"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "game"}]},
    }
    await env.client.request(
        "POST",
        f"/api/v1/namespaces/{NS}/pods",
        info=RequestInfo("create", "pods", namespace=NS),
        body=orjson.dumps(body),
        content_type="application/json",
    )
    return await env.sim.kubelet.wait_running(NS, name)


async def test_a_patch_applies_labels_annotations_and_a_condition(env: Env) -> None:
    pod = await running_pod(env)
    conditions = pod["status"]["conditions"]
    condition = {"type": PROBE_CONDITION, "status": "True", "reason": "ProbeSucceeded"}
    ops = [
        {"op": "test", "path": "/metadata/labels/app", "value": "game"},
        {"op": "add", "path": "/metadata/labels/probemarker.io~1idle", "value": "true"},
        {"op": "add", "path": "/metadata/annotations", "value": {"cost": "-100"}},
        {"op": "test", "path": f"/status/conditions/{len(conditions) - 1}/type",
         "value": conditions[-1]["type"]},
        {"op": "add", "path": "/status/conditions/-", "value": condition},
    ]  # fmt: skip
    answer = await env.patch("gs-1", ops)
    stored = env.stored("gs-1")
    assert answer["metadata"]["labels"] == stored["metadata"]["labels"]
    assert stored["metadata"]["labels"] == {"app": "game", "probemarker.io/idle": "true"}
    assert stored["metadata"]["annotations"] == {"cost": "-100"}
    assert stored["status"]["conditions"][-1]["type"] == PROBE_CONDITION
    assert env.client.requests[("patch", "pods/status", 200)] == 1
    assert env.limiter.granted == 1


async def test_operations_may_be_any_mappings(env: Env) -> None:
    await running_pod(env)
    op = MappingProxyType({"op": "add", "path": "/metadata/labels/x", "value": ("a", "b")[0]})
    await env.patch("gs-1", (op,))
    assert env.stored("gs-1")["metadata"]["labels"]["x"] == "a"


@pytest.mark.parametrize(
    "ops",
    [
        pytest.param(
            [{"op": "test", "path": "/metadata/labels/app", "value": "other"},
             {"op": "add", "path": "/metadata/labels/x", "value": "y"}],
            id="test-value-differs",
        ),
        pytest.param(
            [{"op": "test", "path": "/metadata/labels/missing", "value": "v"},
             {"op": "add", "path": "/metadata/labels/x", "value": "y"}],
            id="test-key-missing",
        ),
        pytest.param(
            [{"op": "add", "path": "/metadata/labels/x", "value": "y"},
             {"op": "test", "path": "/status/conditions/40/type", "value": "Ready"},
             {"op": "remove", "path": "/status/conditions/40"}],
            id="test-index-gone-after-an-add",
        ),
        pytest.param(
            [{"op": "add", "path": "/metadata/labels/x", "value": "y"},
             {"op": "remove", "path": "/metadata/annotations/never-written"}],
            id="remove-path-gone",
        ),
    ],
)  # fmt: skip
async def test_a_patch_that_does_not_apply_is_test_failed_and_changes_nothing(
    env: Env, ops: list[dict[str, Any]]
) -> None:
    await running_pod(env)
    before = env.stored("gs-1")
    with pytest.raises(ApiPatchTestFailed) as failed:
        await env.patch("gs-1", ops)
    assert failed.value.code == 422
    assert "patch pods/status 'gs-1' in namespace 'default'" in str(failed.value)
    assert env.stored("gs-1") == before


async def test_an_invalid_result_is_invalid_not_test_failed(env: Env) -> None:
    await running_pod(env)
    before = env.stored("gs-1")
    ops = [{"op": "add", "path": "/metadata/labels/x", "value": "-not a label value-"}]
    with pytest.raises(ApiInvalid) as invalid:
        await env.patch("gs-1", ops)
    assert not isinstance(invalid.value, ApiPatchTestFailed)
    assert any(cause.field == "metadata.labels" for cause in invalid.value.causes)
    assert env.stored("gs-1") == before


async def test_a_stale_resource_version_is_a_conflict(env: Env) -> None:
    pod = await running_pod(env)
    await env.patch("gs-1", [{"op": "add", "path": "/metadata/labels/x", "value": "1"}])
    before = env.stored("gs-1")
    stale = pod["metadata"]["resourceVersion"]
    ops = [
        {"op": "replace", "path": "/metadata/resourceVersion", "value": stale},
        {"op": "replace", "path": "/metadata/labels/x", "value": "2"},
    ]
    with pytest.raises(ApiConflict) as conflict:
        await env.patch("gs-1", ops)
    assert not isinstance(conflict.value, ApiInvalid)
    assert conflict.value.code == 409
    assert env.stored("gs-1") == before


async def test_an_injected_409_is_a_conflict(env: Env) -> None:
    await running_pod(env)
    env.sim.faults.fail_requests(code=409, verb="patch", subresource="status", times=1)
    with pytest.raises(ApiConflict):
        await env.patch("gs-1", [{"op": "add", "path": "/metadata/labels/x", "value": "1"}])
    await env.patch("gs-1", [{"op": "add", "path": "/metadata/labels/x", "value": "1"}])
    assert env.stored("gs-1")["metadata"]["labels"]["x"] == "1"


async def test_429_is_too_many_requests_with_retry_after(env: Env) -> None:
    await running_pod(env)
    env.sim.faults.fail_requests(code=429, verb="patch", subresource="status", retry_after=7)
    with pytest.raises(ApiTooManyRequests) as throttled:
        await env.patch("gs-1", [{"op": "add", "path": "/metadata/labels/x", "value": "1"}])
    assert throttled.value.retry_after == 7.0
    assert "x" not in env.stored("gs-1")["metadata"]["labels"]


async def test_503_is_a_server_error(env: Env) -> None:
    await running_pod(env)
    env.sim.faults.fail_requests(code=503, verb="patch", subresource="status")
    with pytest.raises(ApiServerError) as failed:
        await env.patch("gs-1", [{"op": "add", "path": "/metadata/labels/x", "value": "1"}])
    assert failed.value.code == 503


async def test_a_missing_pod_is_not_found(env: Env) -> None:
    with pytest.raises(ApiNotFound):
        await env.patch("gone", [{"op": "add", "path": "/metadata/labels/x", "value": "1"}])


async def test_no_operations_is_refused_without_a_request(env: Env) -> None:
    with pytest.raises(ValueError, match="at least one operation"):
        await env.patch("gs-1", [])
    assert env.limiter.granted == 0
    assert env.sim.accounting.count(verb="patch") == 0


async def test_each_patch_waits_for_a_token_of_the_shared_bucket(env: Env) -> None:
    await running_pod(env)
    clock = FakeClock()
    limiter = TokenBucket(qps=1.0, burst=1, clock=clock)

    async def label(value: str) -> None:
        ops = [{"op": "add", "path": "/metadata/labels/x", "value": value}]
        await patch_pod_status(env.client, namespace=NS, name="gs-1", ops=ops, limiter=limiter)

    await label("1")
    second = asyncio.create_task(label("2"))
    await until(lambda: clock.sleeping == 1)
    # The second patch waits for its token: nothing has been sent for it yet.
    assert env.sim.accounting.count(verb="patch", subresource="status") == 1
    assert env.stored("gs-1")["metadata"]["labels"]["x"] == "1"
    clock.advance(1.0)
    await second
    assert env.sim.accounting.count(verb="patch", subresource="status") == 2
    assert env.stored("gs-1")["metadata"]["labels"]["x"] == "2"
    assert clock.sleeps == [pytest.approx(1.0)]


# -- the 422 that a failed `test` gives, as kube-apiserver sends it -------------------

# handlers/patch.go: NewGenericServerResponse(422, "", GroupResource{}, "", err.Error(),
# 0, false): reason Invalid, a fixed message, and (isUnexpectedResponse=false) no causes.
REAL_TEST_FAILED = orjson.dumps(
    {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server rejected our request due to an error in our request",
        "reason": "Invalid",
        "details": {},
        "code": 422,
    }
)
REAL_INVALID = orjson.dumps(
    {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Pod "gs-1" is invalid: metadata.labels: Invalid value: "-x": a valid label',
        "reason": "Invalid",
        "details": {
            "name": "gs-1",
            "kind": "Pod",
            "causes": [
                {"reason": "FieldValueInvalid", "message": 'Invalid value: "-x"', "field": "metadata.labels"}
            ],
        },
        "code": 422,
    }
)  # fmt: skip
PATCH_INFO = RequestInfo("patch", "pods", namespace=NS, name="gs-1", subresource="status")


def test_the_real_servers_422s_are_told_apart() -> None:
    assert type(error_from_response(422, REAL_TEST_FAILED, {}, PATCH_INFO)) is ApiPatchTestFailed
    assert type(error_from_response(422, REAL_INVALID, {}, PATCH_INFO)) is ApiInvalid
