"""The sim's resource API through kubernetes_asyncio: discovery, CRUD, selectors, errors."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from probemarker.sim import SimCluster
from tests.sim.server_helpers import pod_manifest, raw


async def test_version_and_legacy_discovery(sim: SimCluster) -> None:
    status, version = await raw(sim, "GET", "/version")
    assert status == 200
    assert version["major"] == "1"
    assert int(version["minor"]) >= 32
    assert version["gitVersion"].startswith("v1.3")
    _, api = await raw(sim, "GET", "/api")
    assert api["kind"] == "APIVersions"
    assert api["versions"] == ["v1"]
    _, core = await raw(sim, "GET", "/api/v1")
    names = {r["name"] for r in core["resources"]}
    assert {"pods", "pods/status", "pods/exec", "namespaces", "nodes", "events"} <= names
    _, groups = await raw(sim, "GET", "/apis")
    assert {g["name"] for g in groups["groups"]} >= {"events.k8s.io", "apiextensions.k8s.io"}
    _, events = await raw(sim, "GET", "/apis/events.k8s.io/v1")
    assert events["groupVersion"] == "events.k8s.io/v1"


async def test_aggregated_discovery_is_refused_with_plain_json(sim: SimCluster) -> None:
    accept = (
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
        "application/json"
    )
    async with (
        aiohttp.ClientSession() as session,
        session.get(sim.url + "/apis", headers={"Accept": accept}) as response,
    ):
        assert response.headers["Content-Type"].startswith("application/json")
        assert "as=APIGroupDiscoveryList" not in response.headers["Content-Type"]
        assert (await response.json())["kind"] == "APIGroupList"


async def test_openapi_v3_declares_field_validation(sim: SimCluster) -> None:
    _, root = await raw(sim, "GET", "/openapi/v3")
    url = root["paths"]["api/v1"]["serverRelativeURL"]
    _, doc = await raw(sim, "GET", url)
    patch = doc["paths"]["/api/v1/namespaces/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"]["kind"] == "Namespace"
    assert any(p["name"] == "fieldValidation" for p in patch["parameters"])
    status, _ = await raw(sim, "GET", "/openapi/v2")
    assert status == 404


async def test_create_get_and_metadata(core: client.CoreV1Api) -> None:
    created = await core.create_namespaced_pod("default", pod_manifest("web-0"))
    assert created.metadata.uid
    assert created.metadata.creation_timestamp is not None
    assert created.status.phase == "Pending"
    got = await core.read_namespaced_pod("web-0", "default")
    assert got.metadata.uid == created.metadata.uid
    generated = await core.create_namespaced_pod(
        "default", {**pod_manifest(""), "metadata": {"generateName": "gen-"}}
    )
    assert generated.metadata.name.startswith("gen-")
    assert len(generated.metadata.name) == len("gen-") + 5


async def test_resource_versions_increase_across_kinds(core: client.CoreV1Api) -> None:
    a = await core.create_namespaced_pod("default", pod_manifest("a", node=None))
    ns = await core.create_namespace({"metadata": {"name": "team"}})
    b = await core.create_namespaced_pod("team", pod_manifest("b", node=None))
    versions = [int(x.metadata.resource_version) for x in (a, ns, b)]
    assert versions == sorted(versions)
    assert len(set(versions)) == 3


async def test_errors_are_status_objects(sim: SimCluster, core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        await core.read_namespaced_pod("nope", "default")
    assert missing.value.status == 404
    status, body = await raw(sim, "GET", "/api/v1/namespaces/default/pods/nope")
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "pods"},
        "code": 404,
    }
    await core.create_namespaced_pod("default", pod_manifest("dup", node=None))
    with pytest.raises(ApiException) as dup:
        await core.create_namespaced_pod("default", pod_manifest("dup", node=None))
    assert dup.value.status == 409
    with pytest.raises(ApiException) as no_ns:
        await core.create_namespaced_pod("ghost", pod_manifest("x", node=None))
    assert no_ns.value.status == 404
    status, body = await raw(sim, "GET", "/apis/nosuch.io/v1/things")
    assert (status, body["reason"]) == (404, "NotFound")


async def test_update_conflict_on_stale_resource_version(core: client.CoreV1Api) -> None:
    pod = await core.create_namespaced_pod("default", pod_manifest("c", node=None))
    first = pod.to_dict()
    pod.metadata.labels = {"v": "1"}
    await core.replace_namespaced_pod("c", "default", pod)
    stale = await core.read_namespaced_pod("c", "default")
    stale.metadata.resource_version = first["metadata"]["resource_version"]
    stale.metadata.labels = {"v": "2"}
    with pytest.raises(ApiException) as conflict:
        await core.replace_namespaced_pod("c", "default", stale)
    assert conflict.value.status == 409
    assert "the object has been modified" in conflict.value.body


async def test_list_with_label_and_field_selectors(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(
        "default", pod_manifest("p1", labels={"app": "a", "tier": "1"})
    )
    await core.create_namespaced_pod(
        "default", pod_manifest("p2", labels={"app": "b"}, node="node-2")
    )
    await core.create_namespaced_pod("default", pod_manifest("p3", labels={"app": "a"}, node=None))

    async def names(**kwargs: Any) -> list[str]:
        result = await core.list_namespaced_pod("default", **kwargs)
        return [p.metadata.name for p in result.items]

    assert await names(label_selector="app=a") == ["p1", "p3"]
    assert await names(label_selector="app in (a,b),!tier") == ["p2", "p3"]
    assert await names(label_selector="app!=a") == ["p2"]
    assert await names(field_selector="spec.nodeName=node-2") == ["p2"]
    assert await names(field_selector="metadata.name!=p1,spec.nodeName!=node-2") == ["p3"]
    with pytest.raises(ApiException) as bad:
        await names(field_selector="spec.bogus=x")
    assert bad.value.status == 400


async def test_list_pagination_with_limit_and_continue(core: client.CoreV1Api) -> None:
    for i in range(5):
        await core.create_namespaced_pod("default", pod_manifest(f"page-{i}", node=None))
    seen: list[str] = []
    token = None
    while True:
        page = await core.list_namespaced_pod("default", limit=2, _continue=token)
        seen += [p.metadata.name for p in page.items]
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count is not None
    assert seen == [f"page-{i}" for i in range(5)]


async def test_delete_pod_goes_through_grace_period(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod("default", pod_manifest("g"))
    await sim.kubelet.wait_running("default", "g")
    deleted = await core.delete_namespaced_pod("g", "default")
    assert deleted.metadata.deletion_timestamp is not None
    still = await core.read_namespaced_pod("g", "default")
    assert still.metadata.deletion_grace_period_seconds == 30
    assert sim.kubelet.finish_deletion("default", "g")
    with pytest.raises(ApiException) as gone:
        await core.read_namespaced_pod("g", "default")
    assert gone.value.status == 404


async def test_events_are_served_by_both_apis(
    api: client.ApiClient, core: client.CoreV1Api
) -> None:
    events_v1 = client.EventsV1Api(api)
    pod = await core.create_namespaced_pod("default", pod_manifest("ev", node=None))
    await events_v1.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "ev.probe"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "probemarker.io/daemon",
            "reportingInstance": "node-1",
            "action": "Probe",
            "reason": "ProbeSucceeded",
            "note": "healthy",
            "type": "Normal",
            "regarding": {
                "kind": "Pod",
                "namespace": "default",
                "name": "ev",
                "uid": pod.metadata.uid,
                "apiVersion": "v1",
            },
        },
    )
    core_events = await core.list_namespaced_event(
        "default", field_selector="involvedObject.name=ev,involvedObject.kind=Pod"
    )
    assert [(e.reason, e.message) for e in core_events.items] == [("ProbeSucceeded", "healthy")]
    v1_events = await events_v1.list_namespaced_event("default", field_selector="regarding.name=ev")
    assert [e.note for e in v1_events.items] == ["healthy"]


async def test_https_with_token(tmp_path: Any) -> None:
    async with SimCluster(https=True, token="s3cret") as sim:
        async with client.ApiClient(sim.configuration()) as api:
            namespaces = await client.CoreV1Api(api).list_namespace()
            assert "default" in [n.metadata.name for n in namespaces.items]
        config = sim.configuration()
        config.api_key = {"BearerToken": "wrong"}
        async with client.ApiClient(config) as api:
            with pytest.raises(ApiException) as denied:
                await client.CoreV1Api(api).list_namespace()
            assert denied.value.status == 401
        assert sim.url.startswith("https://")
        assert "certificate-authority-data" in sim.kubeconfig_path.read_text()


async def test_namespace_deletion_removes_contents_but_not_default(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespace({"metadata": {"name": "tmp"}})
    await core.create_namespaced_pod("tmp", pod_manifest("inside", node=None))
    await core.delete_namespace("tmp")
    with pytest.raises(ApiException) as gone:
        await core.read_namespaced_pod("inside", "tmp")
    assert gone.value.status == 404
    with pytest.raises(ApiException) as immortal:
        await core.delete_namespace("default")
    assert immortal.value.status == 403
    assert "this namespace may not be deleted" in immortal.value.body


async def test_cluster_scoped_resource_under_a_namespace_is_not_found(sim: SimCluster) -> None:
    status, _ = await raw(sim, "GET", "/api/v1/namespaces/default/nodes")
    assert status == 404


async def test_events_v1_are_validated_strictly(api: client.ApiClient) -> None:
    events_v1 = client.EventsV1Api(api)
    with pytest.raises(ApiException) as refused:
        await events_v1.create_namespaced_event(
            "default",
            {
                "metadata": {"name": "bad"},
                "reason": "Probe",
                "type": "Normal",
                "regarding": {"kind": "Pod", "namespace": "default", "name": "x"},
            },
        )
    assert refused.value.status == 422
    body = orjson.loads(refused.value.body)
    assert body["message"].startswith('Event.events.k8s.io "bad" is invalid: ')
    assert {c["field"] for c in body["details"]["causes"]} == {"eventTime"}
    with pytest.raises(ApiException) as unset:
        await events_v1.create_namespaced_event(
            "default",
            {
                "metadata": {"name": "bad2"},
                "eventTime": "2026-01-01T00:00:00.000000Z",
                "reason": "Probe",
                "type": "Normal",
                "action": "Probe",
                "reportingController": "probemarker.io/daemon",
                "reportingInstance": "n1",
                "deprecatedCount": 3,
                "regarding": {"kind": "Pod", "namespace": "default", "name": "x"},
            },
        )
    assert orjson.loads(unset.value.body)["message"] == (
        'Event.events.k8s.io "bad2" is invalid: count: Invalid value: "": needs to be unset'
    )


async def test_core_event_namespace_must_match_involved_object(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as refused:
        await core.create_namespaced_event(
            "default",
            {
                "metadata": {"name": "e"},
                "reason": "R",
                "message": "m",
                "involvedObject": {"kind": "Pod", "namespace": "other", "name": "x"},
            },
        )
    assert refused.value.status == 422
    assert "does not match event.namespace" in refused.value.body
