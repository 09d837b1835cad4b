"""OpenAPI v3 documents (what `kubectl explain` reads), DELETE answers and bookmark versions."""

from __future__ import annotations

import copy
from typing import Any

import aiohttp
import orjson
import yaml

from probemarker.sim import SimCluster
from probemarker.sim.server.discovery.openapi_crd import crd_schemas, definition_name
from tests.sim.server_helpers import pod_manifest, raw
from tests.sim.test_server_crd import PROJECT_CRD, WIDGET_CRD

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PPM = "io.probemarker.v1alpha1.PodProbeMarker"
OBJECT_META = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def project_crd() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(PROJECT_CRD.read_text())
    return loaded


async def gv_doc(sim: SimCluster, path: str) -> tuple[str, dict[str, Any]]:
    """The serverRelativeURL `/openapi/v3` gives for `path`, and the document there."""
    _, root = await raw(sim, "GET", "/openapi/v3")
    url: str = root["paths"][path]["serverRelativeURL"]
    status, doc = await raw(sim, "GET", url)
    assert status == 200
    return url, doc


def refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(refs(v) for v in node))
    return set()


async def test_crd_schema_is_published_for_its_group_version(sim: SimCluster) -> None:
    status, _ = await raw(sim, "POST", CRDS, json=project_crd())
    assert status == 201
    url, doc = await gv_doc(sim, "apis/probemarker.io/v1alpha1")
    assert url.startswith("/openapi/v3/apis/probemarker.io/v1alpha1?hash=")
    schemas = doc["components"]["schemas"]
    kind = schemas[PPM]
    assert kind["x-kubernetes-group-version-kind"] == [
        {"group": "probemarker.io", "kind": "PodProbeMarker", "version": "v1alpha1"}
    ]
    assert kind["properties"]["metadata"]["allOf"] == [{"$ref": OBJECT_META}]
    probe = kind["properties"]["spec"]["properties"]["probes"]["items"]["properties"]["probe"]
    assert probe["properties"]["periodSeconds"]["description"] == "Seconds between probe runs."
    listed = schemas["io.probemarker.v1alpha1.PodProbeMarkerList"]
    assert listed["properties"]["items"]["items"] == {"$ref": f"#/components/schemas/{PPM}"}
    assert listed["x-kubernetes-group-version-kind"][0]["kind"] == "PodProbeMarkerList"
    item = doc["paths"][
        "/apis/probemarker.io/v1alpha1/namespaces/{namespace}/podprobemarkers/{name}"
    ]
    assert item["get"]["x-kubernetes-group-version-kind"]["kind"] == "PodProbeMarker"
    assert {p["name"] for p in item["patch"]["parameters"]} >= {"fieldValidation", "dryRun"}
    for name in refs(doc):  # every reference resolves within the document
        assert name.removeprefix("#/components/schemas/") in schemas, name


async def test_documents_follow_crd_changes_and_deletion(sim: SimCluster) -> None:
    await raw(sim, "POST", CRDS, json=WIDGET_CRD)
    first_url, first = await gv_doc(sim, "apis/example.io/v1")
    assert "description" not in first["components"]["schemas"]["io.example.v1.Widget"]
    _, crd = await raw(sim, "GET", f"{CRDS}/widgets.example.io")
    changed = copy.deepcopy(crd)
    changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "A widget."
    status, _ = await raw(sim, "PUT", f"{CRDS}/widgets.example.io", json=changed)
    assert status == 200
    second_url, second = await gv_doc(sim, "apis/example.io/v1")
    assert second_url != first_url
    assert second["components"]["schemas"]["io.example.v1.Widget"]["description"] == "A widget."
    await raw(sim, "DELETE", f"{CRDS}/widgets.example.io")
    _, root = await raw(sim, "GET", "/openapi/v3")
    assert "apis/example.io/v1" not in root["paths"]
    status, _ = await raw(sim, "GET", "/openapi/v3/apis/example.io/v1")
    assert status == 404


async def test_builtin_kinds_have_schemas_but_no_strategic_merge_patch(sim: SimCluster) -> None:
    _, doc = await gv_doc(sim, "api/v1")
    pod = doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Pod", "version": "v1"}]
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    # kubectl apply must keep using its compiled-in patch strategies for built-in kinds.
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    assert any(p["name"] == "fieldValidation" for p in patch["parameters"])


def test_int_or_string_and_embedded_resources_are_unfolded() -> None:
    crd = copy.deepcopy(WIDGET_CRD)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["port"] = {"x-kubernetes-int-or-string": True}
    spec["properties"]["template"] = {
        "type": "object",
        "x-kubernetes-embedded-resource": True,
        "x-kubernetes-preserve-unknown-fields": True,
    }
    schemas = crd_schemas(crd, "v1")
    widget = schemas[definition_name("example.io", "v1", "Widget")]["properties"]["spec"]
    assert widget["properties"]["port"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    template = widget["properties"]["template"]
    assert set(template["properties"]) == {"apiVersion", "kind", "metadata"}
    assert set(template["required"]) == {"apiVersion", "kind"}
    assert (
        "port"
        not in WIDGET_CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
            "properties"
        ]
    )  # the CRD itself is left alone
    assert crd_schemas(crd, "v2") == {}
    assert definition_name("stable", "v1", "Foo") == "stable.v1.Foo"


async def test_delete_answers_status_or_object_as_kubernetes_does(sim: SimCluster) -> None:
    status, node = await raw(sim, "POST", "/api/v1/nodes", json={"metadata": {"name": "extra"}})
    assert status == 201
    _, answer = await raw(sim, "DELETE", "/api/v1/nodes/extra")
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "extra", "kind": "nodes", "uid": node["metadata"]["uid"]},
    }
    await raw(sim, "POST", CRDS, json=WIDGET_CRD)
    widgets = "/apis/example.io/v1/namespaces/default/widgets"
    body = {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 1},
    }
    await raw(sim, "POST", widgets, json=body)
    _, dry = await raw(sim, "DELETE", f"{widgets}/w?dryRun=All")
    assert dry["kind"] == "Status"
    _, answer = await raw(sim, "DELETE", f"{widgets}/w")
    assert answer["kind"] == "Status"
    assert answer["details"]["group"] == "example.io"
    assert answer["details"]["kind"] == "widgets"
    held = {**body, "metadata": {"name": "held", "finalizers": ["example.io/keep"]}}
    await raw(sim, "POST", widgets, json=held)
    _, marked = await raw(sim, "DELETE", f"{widgets}/held")
    assert marked["kind"] == "Widget"  # still there, waiting for its finalizer
    assert marked["metadata"]["deletionTimestamp"]
    await raw(sim, "POST", "/api/v1/namespaces/default/pods", json=pod_manifest("p", node=None))
    _, pod = await raw(sim, "DELETE", "/api/v1/namespaces/default/pods/p")
    assert pod["kind"] == "Pod"  # ReturnDeletedObject
    _, crd = await raw(sim, "DELETE", f"{CRDS}/widgets.example.io")
    assert crd["kind"] == "CustomResourceDefinition"


async def test_events_v1_delete_and_bookmarks_carry_the_watched_group(sim: SimCluster) -> None:
    events = "/apis/events.k8s.io/v1/namespaces/default/events"
    event = {
        "metadata": {"name": "e"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "probemarker.io/daemon",
        "reportingInstance": "node-1",
        "action": "Probe",
        "reason": "ProbeSucceeded",
        "type": "Normal",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "x", "apiVersion": "v1"},
    }
    status, _ = await raw(sim, "POST", events, json=event)
    assert status == 201
    _, answer = await raw(sim, "DELETE", f"{events}/e")
    assert answer["kind"] == "Status"
    assert answer["details"]["group"] == "events.k8s.io"
    assert answer["details"]["kind"] == "events"
    sim.store.bookmark_interval = 0.05
    params = {
        "watch": "1",
        "allowWatchBookmarks": "true",
        "resourceVersion": str(sim.store.resource_version),
    }
    for path, api_version in (
        (events, "events.k8s.io/v1"),
        ("/api/v1/namespaces/default/events", "v1"),
    ):
        async with (
            aiohttp.ClientSession() as session,
            session.get(sim.url + path, params=params) as response,
        ):
            line = await response.content.readline()
        bookmark = orjson.loads(line)
        assert bookmark["type"] == "BOOKMARK"
        assert bookmark["object"]["apiVersion"] == api_version
        assert bookmark["object"]["kind"] == "Event"
