"""Every patch type on pods and pods/status, through kubernetes_asyncio."""

from __future__ import annotations

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from probemarker.sim import SimCluster
from tests.sim.server_helpers import pod_manifest

JSON_PATCH = "application/json-patch+json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


async def test_json_patch_on_pod_metadata(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("j", labels={"a": "1"}, node=None))
    patched = await core.patch_namespaced_pod(
        "j",
        "default",
        [
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
        ],
    )
    assert patched.metadata.labels == {"a": "1", "b": "2"}
    with pytest.raises(ApiException) as failed:
        await core.patch_namespaced_pod(
            "j", "default", [{"op": "test", "path": "/metadata/labels/a", "value": "9"}]
        )
    assert failed.value.status == 422


async def test_json_patch_add_to_absent_conditions_fails(core: client.CoreV1Api) -> None:
    """A pod without conditions has no `status.conditions` (empty lists are dropped)."""
    await core.create_namespaced_pod("default", pod_manifest("nc", node=None))
    condition = {"type": "example.io/probe", "status": "True"}
    with pytest.raises(ApiException) as failed:
        await core.patch_namespaced_pod_status(
            "nc", "default", [{"op": "add", "path": "/status/conditions/-", "value": condition}]
        )
    assert failed.value.status == 422
    created = await core.patch_namespaced_pod_status(
        "nc", "default", [{"op": "add", "path": "/status/conditions", "value": [condition]}]
    )
    assert [c.type for c in created.status.conditions] == ["example.io/probe"]


async def test_status_patch_keeps_spec_and_takes_labels(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("s", node=None))
    patched = await core.patch_namespaced_pod_status(
        "s",
        "default",
        {
            "metadata": {"labels": {"probe": "ok"}, "annotations": {"x.io/a": "b"}},
            "spec": {"activeDeadlineSeconds": 5},
            "status": {"conditions": [{"type": "x.io/ready", "status": "True"}]},
        },
        _content_type=MERGE,
    )
    assert patched.metadata.labels == {"probe": "ok"}
    assert patched.metadata.annotations == {"x.io/a": "b"}
    assert patched.spec.active_deadline_seconds is None
    assert [c.type for c in patched.status.conditions] == ["x.io/ready"]


async def test_main_resource_patch_ignores_status(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("m", node=None))
    patched = await core.patch_namespaced_pod(
        "m",
        "default",
        {"metadata": {"labels": {"k": "v"}}, "status": {"phase": "Failed"}},
        _content_type=MERGE,
    )
    assert patched.metadata.labels == {"k": "v"}
    assert patched.status.phase == "Pending"


async def test_strategic_merge_patch_merges_conditions_by_type(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod("default", pod_manifest("smp"))
    await sim.kubelet.wait_running("default", "smp")
    patched = await core.patch_namespaced_pod_status(
        "smp",
        "default",
        {"status": {"conditions": [{"type": "x.io/probe", "status": "False"}]}},
    )
    types = [c.type for c in patched.status.conditions]
    assert "Ready" in types
    assert "x.io/probe" in types
    again = await core.patch_namespaced_pod_status(
        "smp",
        "default",
        {"status": {"conditions": [{"type": "x.io/probe", "status": "True"}]}},
        _content_type=STRATEGIC,
    )
    probe = [c for c in again.status.conditions if c.type == "x.io/probe"]
    assert [c.status for c in probe] == ["True"]


async def test_patch_with_stale_resource_version_conflicts(core: client.CoreV1Api) -> None:
    pod = await core.create_namespaced_pod("default", pod_manifest("rv", node=None))
    await core.patch_namespaced_pod("rv", "default", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(ApiException) as conflict:
        await core.patch_namespaced_pod(
            "rv",
            "default",
            {"metadata": {"resourceVersion": pod.metadata.resource_version, "labels": {"a": "c"}}},
            _content_type=MERGE,
        )
    assert conflict.value.status == 409


async def test_noop_patch_keeps_resource_version(core: client.CoreV1Api) -> None:
    pod = await core.create_namespaced_pod(
        "default", pod_manifest("noop", labels={"a": "b"}, node=None)
    )
    same = await core.patch_namespaced_pod("noop", "default", {"metadata": {"labels": {"a": "b"}}})
    assert same.metadata.resource_version == pod.metadata.resource_version


async def test_unsupported_patch_types_get_415(sim: SimCluster, core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_manifest("t", node=None))
    async with aiohttp.ClientSession() as session:
        for content_type in ("application/apply-patch+yaml", "text/plain"):
            async with session.patch(
                sim.url + "/api/v1/namespaces/default/pods/t",
                data=b"{}",
                headers={"Content-Type": content_type},
            ) as response:
                assert response.status == 415
                assert (await response.json())["reason"] == "UnsupportedMediaType"
