"""Event updates through the API are validated as kube-apiserver validates them, and
pods get the QoS class the API server computes on create."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from probemarker.sim import SimCluster
from tests.sim.server_helpers import pod_manifest, raw

JSON_PATCH = {"Content-Type": "application/json-patch+json"}


def core_event(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p", "apiVersion": "v1"},
        "reason": "ProbeSucceeded",
        "message": "ok",
        "type": "Normal",
        "count": 1,
        "firstTimestamp": "2026-11-23T00:00:00Z",
        "lastTimestamp": "2026-11-23T00:00:00Z",
        "source": {"component": "probemarker"},
    }


async def test_core_event_count_can_be_patched(sim: SimCluster) -> None:
    status, _ = await raw(sim, "POST", "/api/v1/namespaces/default/events", json=core_event("e"))
    assert status == 201
    ops = [
        {"op": "replace", "path": "/count", "value": 2},
        {"op": "replace", "path": "/lastTimestamp", "value": "2026-11-23T00:01:00Z"},
    ]
    status, body = await raw(
        sim, "PATCH", "/api/v1/namespaces/default/events/e", json=ops, headers=JSON_PATCH
    )
    assert (status, body["count"]) == (200, 2)


async def test_events_v1_refuses_changing_an_immutable_field(sim: SimCluster) -> None:
    status, _ = await raw(sim, "POST", "/api/v1/namespaces/default/events", json=core_event("e"))
    assert status == 201
    ops = [{"op": "replace", "path": "/reason", "value": "Other"}]
    status, body = await raw(
        sim,
        "PATCH",
        "/apis/events.k8s.io/v1/namespaces/default/events/e",
        json=ops,
        headers=JSON_PATCH,
    )
    assert status == 422
    assert "field is immutable" in body["message"]


async def test_unscheduled_pod_gets_its_qos_class_on_create(core: client.CoreV1Api) -> None:
    resources = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    manifest = pod_manifest("q", node=None)
    manifest["spec"]["containers"][0]["resources"] = resources
    created = await core.create_namespaced_pod("default", manifest)
    assert created.status.qos_class == "Burstable"
