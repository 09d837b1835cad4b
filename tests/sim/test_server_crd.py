"""CustomResourceDefinitions: creating one serves the custom resource, admitted by its schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from probemarker.sim import SimCluster
from tests.sim.server_helpers import raw

MERGE = "application/merge-patch+json"
REPO = Path(__file__).resolve().parents[2]
PROJECT_CRD = REPO / "manifests" / "crd" / "podprobemarkers.probemarker.io.yaml"

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.io"},
    "spec": {
        "group": "example.io",
        "scope": "Namespaced",
        "names": {
            "plural": "widgets",
            "singular": "widget",
            "kind": "Widget",
            "shortNames": ["wd"],
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1},
                                    "color": {"type": "string", "default": "blue"},
                                    "mode": {"type": "string"},
                                },
                                "x-kubernetes-validations": [
                                    {
                                        "rule": "self.size <= 10",
                                        "message": "size must be at most 10",
                                    },
                                    {
                                        "rule": "!has(oldSelf.mode) || self.mode == oldSelf.mode",
                                        "message": "mode is immutable",
                                    },
                                ],
                            },
                            "status": {
                                "type": "object",
                                "properties": {"ready": {"type": "boolean"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": spec,
    }


@pytest.fixture
async def widgets(sim: SimCluster, api: client.ApiClient) -> client.CustomObjectsApi:
    ext = client.ApiextensionsV1Api(api)
    crd = await ext.create_custom_resource_definition(WIDGET_CRD)
    assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"
    return client.CustomObjectsApi(api)


async def test_crd_serves_discovery(sim: SimCluster, widgets: client.CustomObjectsApi) -> None:
    _, groups = await raw(sim, "GET", "/apis")
    assert "example.io" in [g["name"] for g in groups["groups"]]
    _, resources = await raw(sim, "GET", "/apis/example.io/v1")
    names = {r["name"]: r for r in resources["resources"]}
    assert names["widgets"]["kind"] == "Widget"
    assert names["widgets"]["shortNames"] == ["wd"]
    assert "widgets/status" in names


async def test_custom_resource_defaults_and_generation(widgets: client.CustomObjectsApi) -> None:
    created = await widgets.create_namespaced_custom_object(
        "example.io", "v1", "default", "widgets", widget("w1", size=2, bogus="pruned")
    )
    assert created["spec"] == {"size": 2, "color": "blue"}
    assert created["metadata"]["generation"] == 1
    status = await widgets.patch_namespaced_custom_object_status(
        "example.io",
        "v1",
        "default",
        "widgets",
        "w1",
        {"status": {"ready": True}},
        _content_type=MERGE,
    )
    assert status["status"] == {"ready": True}
    assert status["metadata"]["generation"] == 1
    changed = await widgets.patch_namespaced_custom_object(
        "example.io", "v1", "default", "widgets", "w1", {"spec": {"size": 3}}, _content_type=MERGE
    )
    assert changed["metadata"]["generation"] == 2
    assert changed["status"] == {"ready": True}


async def test_invalid_custom_resource_is_refused_with_422(
    widgets: client.CustomObjectsApi,
) -> None:
    with pytest.raises(ApiException) as too_big:
        await widgets.create_namespaced_custom_object(
            "example.io", "v1", "default", "widgets", widget("big", size=11)
        )
    assert too_big.value.status == 422
    body = yaml.safe_load(too_big.value.body)
    assert body["reason"] == "Invalid"
    assert body["message"].startswith('Widget.example.io "big" is invalid: ')
    assert "size must be at most 10" in body["message"]
    assert body["details"]["causes"][0]["field"] == "spec"
    with pytest.raises(ApiException) as zero:
        await widgets.create_namespaced_custom_object(
            "example.io", "v1", "default", "widgets", widget("zero", size=0)
        )
    assert zero.value.status == 422


async def test_transition_rule_uses_old_self(widgets: client.CustomObjectsApi) -> None:
    await widgets.create_namespaced_custom_object(
        "example.io", "v1", "default", "widgets", widget("t", size=1, mode="a")
    )
    with pytest.raises(ApiException) as immutable:
        await widgets.patch_namespaced_custom_object(
            "example.io",
            "v1",
            "default",
            "widgets",
            "t",
            {"spec": {"mode": "b"}},
            _content_type=MERGE,
        )
    assert immutable.value.status == 422
    assert "mode is immutable" in immutable.value.body


async def test_strategic_merge_patch_is_refused_for_custom_resources(
    sim: SimCluster, widgets: client.CustomObjectsApi
) -> None:
    await widgets.create_namespaced_custom_object(
        "example.io", "v1", "default", "widgets", widget("s", size=1)
    )
    status, body = await raw(
        sim,
        "PATCH",
        "/apis/example.io/v1/namespaces/default/widgets/s",
        data=b"{}",
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")


async def test_deleting_the_crd_stops_serving(
    sim: SimCluster, api: client.ApiClient, widgets: client.CustomObjectsApi
) -> None:
    await client.ApiextensionsV1Api(api).delete_custom_resource_definition("widgets.example.io")
    status, _ = await raw(sim, "GET", "/apis/example.io/v1/namespaces/default/widgets")
    assert status == 404


@pytest.mark.skipif(not PROJECT_CRD.exists(), reason="project CRD not written yet")
async def test_project_crd_refuses_an_invalid_marker(api: client.ApiClient) -> None:
    crd = yaml.safe_load(PROJECT_CRD.read_text())
    await client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    markers = client.CustomObjectsApi(api)
    invalid = {
        "apiVersion": "probemarker.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {"name": "bad"},
        "spec": {"selector": {}, "probes": []},
    }
    with pytest.raises(ApiException) as refused:
        await markers.create_namespaced_custom_object(
            "probemarker.io", "v1alpha1", "default", "podprobemarkers", invalid
        )
    assert refused.value.status == 422
    body = yaml.safe_load(refused.value.body)
    assert body["message"].startswith('PodProbeMarker.probemarker.io "bad" is invalid')
    assert "spec.selector" in [cause["field"] for cause in body["details"]["causes"]]


async def test_field_validation_strict_refuses_unknown_fields(
    sim: SimCluster, widgets: client.CustomObjectsApi
) -> None:
    path = "/apis/example.io/v1/namespaces/default/widgets"
    body = widget("u", size=1, bogus=True)
    status, refused = await raw(sim, "POST", path + "?fieldValidation=Strict", json=body)
    assert (status, refused["reason"]) == (400, "BadRequest")
    assert refused["message"] == 'strict decoding error: unknown field "spec.bogus"'
    async with aiohttp.ClientSession() as session, session.post(sim.url + path, json=body) as resp:
        assert resp.status == 201
        assert resp.headers.getall("Warning") == ['299 - "unknown field \\"spec.bogus\\""']


async def test_dry_run_does_not_store(sim: SimCluster, widgets: client.CustomObjectsApi) -> None:
    path = "/apis/example.io/v1/namespaces/default/widgets"
    status, created = await raw(sim, "POST", path + "?dryRun=All", json=widget("d", size=1))
    assert status == 201
    assert created["spec"] == {"size": 1, "color": "blue"}
    status, _ = await raw(sim, "GET", path + "/d")
    assert status == 404
    status, _ = await raw(sim, "POST", path + "?dryRun=All", json=widget("d", size=99))
    assert status == 422
