"""Sample pods/status updates for the node-scope policy tests, as kube-apiserver hands
them to validating admission.

A sample is the admission request (user, groups, extra), the stored pod (oldObject) and
the pod after the JSON patch and the pod status strategy (object: spec, ownerReferences
and system metadata from the stored pod, managedFields updated by the field manager;
probemarker.sim.store.strategy, which follows pkg/registry/core/pod/strategy.go and
rest.BeforeUpdate). The daemon's own write is the one probemarker.write.patch builds.
Values are shaped as runtime.DefaultUnstructuredConverter gives them to CEL: omitempty
fields left out, nulls kept (`lastProbeTime: null`).
"""

from __future__ import annotations

from typing import Any

from probemarker.api.model import ProbeState
from probemarker.identity.probes import OwnerRef
from probemarker.sim.server.discovery.catalog import PODS
from probemarker.sim.store.patch import apply_json_patch
from probemarker.sim.store.strategy import keep_system_meta, status_write
from probemarker.watch.pods import pod_projection, pod_view
from probemarker.write.desired import Decided, desired_state
from probemarker.write.patch import build_patch
from tests.unit.write.helpers import spec

DAEMON = "system:serviceaccount:probemarker-system:probemarker"
NODE_NAME_KEY = "authentication.kubernetes.io/node-name"
NOW = "2026-11-26T12:00:00Z"


def stored_pod(*, node: str | None = "node-a") -> dict[str, Any]:
    """A running pod as kube-apiserver keeps it (unstructured, as admission sees it)."""
    running = {"running": {"startedAt": "2026-11-26T11:00:00Z"}}
    conditions = [
        ("PodReadyToStartContainers", "True"),
        ("Initialized", "True"),
        ("Ready", "True"),
        ("ContainersReady", "True"),
        ("PodScheduled", "True"),
    ]
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-7d4b9",
            "generateName": "web-",
            "namespace": "shop",
            "uid": "0b7e3c52-9f0d-4f5e-a1b2-3c4d5e6f7a8b",
            "resourceVersion": "1001",
            "creationTimestamp": "2026-11-26T10:59:58Z",
            "labels": {"app": "web", "app.kubernetes.io/name": "web", "kubernetes.io/os": "linux"},
            "annotations": {"kubernetes.io/config.source": "api"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web",
                    "uid": "5a6b7c8d-0000-4000-8000-000000000001",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-11-26T10:59:58Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {}}},
                }
            ],
        },
        "spec": {
            "containers": [{"name": "main", "image": "registry.example/web:1"}],
            "serviceAccountName": "default",
            "restartPolicy": "Always",
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "lastProbeTime": None,
                    "lastTransitionTime": "2026-11-26T11:00:00Z",
                }
                for t, s in conditions
            ],
            "hostIP": "10.0.0.11",
            "hostIPs": [{"ip": "10.0.0.11"}],
            "podIP": "10.244.1.7",
            "podIPs": [{"ip": "10.244.1.7"}],
            "startTime": "2026-11-26T10:59:59Z",
            "containerStatuses": [
                {
                    "name": "main",
                    "state": running,
                    "ready": True,
                    "restartCount": 0,
                    "image": "registry.example/web:1",
                    "imageID": "registry.example/web@sha256:0123",
                    "containerID": "containerd://abc",
                    "started": True,
                }
            ],
            "qosClass": "BestEffort",
        },
    }
    if node is not None:
        pod["spec"]["nodeName"] = node
    return pod


def admitted_object(old: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """The pod a JSON patch to pods/status becomes before validating admission: the patch,
    the status strategy and BeforeUpdate, and the field manager's entry. Nulls stay, as
    the API server's conversion to unstructured keeps them (`lastProbeTime: null`)."""
    patched = apply_json_patch(old, ops)
    new = keep_system_meta(PODS, old, status_write(PODS, old, patched))
    managed = [
        *old["metadata"].get("managedFields", []),
        {
            "manager": "probemarker",
            "operation": "Update",
            "apiVersion": "v1",
            "time": NOW,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {}}},
            "subresource": "status",
        },
    ]
    return {**new, "metadata": {**new["metadata"], "managedFields": managed}}


def request_of(
    pod: dict[str, Any],
    *,
    user: str = DAEMON,
    extra: dict[str, list[str]] | None = None,
    operation: str = "UPDATE",
    subresource: str = "status",
) -> dict[str, Any]:
    """The admission request as kube-apiserver builds it (CreateAdmissionRequest, then
    runtime.DefaultUnstructuredConverter: an empty `extra` is left out, omitempty)."""
    namespace = user.split(":")[2] if user.startswith("system:serviceaccount:") else ""
    groups = (
        ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]
        if namespace
        else ["system:authenticated"]
    )
    user_info: dict[str, Any] = {"username": user, "uid": "sa-uid", "groups": groups}
    if extra:
        user_info["extra"] = extra
    gvk = {"group": "", "version": "v1", "kind": "Pod"}
    gvr = {"group": "", "version": "v1", "resource": "pods"}
    return {
        "kind": gvk,
        "resource": gvr,
        "subResource": subresource,
        "requestKind": gvk,
        "requestResource": gvr,
        "requestSubResource": subresource,
        "name": pod["metadata"]["name"],
        "namespace": pod["metadata"]["namespace"],
        "operation": operation,
        "userInfo": user_info,
        "dryRun": False,
        "options": {"kind": "PatchOptions", "apiVersion": "meta.k8s.io/v1"},
    }


def bound_extra(node: str = "node-a") -> dict[str, list[str]]:
    """The user extra of a token bound to the daemon's pod on `node` (1.30+)."""
    return {
        "authentication.kubernetes.io/credential-id": ["JTI=7f0e0c4a"],
        NODE_NAME_KEY: [node],
        "authentication.kubernetes.io/node-uid": ["8c1d-node-uid"],
        "authentication.kubernetes.io/pod-name": ["probemarker-x7k2p"],
        "authentication.kubernetes.io/pod-uid": ["4e2f-pod-uid"],
    }


def daemon_write(old: dict[str, Any], *, live: bool = True) -> list[dict[str, Any]]:
    """The daemon's own patch for a marker whose probe succeeded (live) or was deleted
    (not live: its clean-up): a label, two annotations with the ownership record, a
    condition of its own type."""
    probe = spec(
        name="idle",
        ok={"example.com/idle": "true"},
        ok_annotations={"controller.kubernetes.io/pod-deletion-cost": "-10"},
        condition="example.com/Idle",
    )
    owner = OwnerRef("game-server-idle", "idle")
    view = pod_view(pod_projection(old))
    decided = [Decided(owner, probe, ProbeState.SUCCEEDED, "idle")] if live else []
    desired = desired_state(pod=view, decided=decided, live={owner: probe} if live else {})
    return build_patch(pod=view, desired=desired, now=NOW)


def add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def key(text: str) -> str:
    """A map key as a JSON pointer token."""
    return text.replace("~", "~0").replace("/", "~1")


def replace(path: str, value: Any) -> dict[str, Any]:
    return {"op": "replace", "path": path, "value": value}


def remove(path: str) -> dict[str, Any]:
    return {"op": "remove", "path": path}
