"""Defaulting and admission the sim applies to built-in kinds on create.

kube-apiserver fills in defaults (pkg/apis/core/v1/defaults.go), admission
plugins (ServiceAccount, DefaultTolerationSeconds, NamespaceLifecycle's
`kubernetes.io/metadata.name` label) and the pod strategy's PrepareForCreate
(`status.phase: Pending`, `status.qosClass`).  The sim applies the subset a
client can notice; it is not a full validator.  Pure functions returning new
objects.
"""

from __future__ import annotations

import copy
from typing import Any

from probemarker.sim.server.kinds.qos import pod_qos_class
from probemarker.sim.server.request.status import StatusError

_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]


def _default_container(container: dict[str, Any]) -> None:
    image = str(container.get("image", ""))
    tagless = ":" not in image.rsplit("/", 1)[-1] and "@" not in image
    container.setdefault(
        "imagePullPolicy", "Always" if tagless or image.endswith(":latest") else "IfNotPresent"
    )
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    for port in container.get("ports", []) or []:
        port.setdefault("protocol", "TCP")


def _invalid_pod(name: str, field: str, message: str) -> StatusError:
    return StatusError(
        422,
        "Invalid",
        f'Pod "{name}" is invalid: {field}: {message}',
        details={
            "name": name,
            "kind": "Pod",
            "causes": [{"reason": "FieldValueRequired", "message": message, "field": field}],
        },
    )


def admit_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """A pod as kube-apiserver would store it on create (defaults, minimal validation)."""
    out = copy.deepcopy(pod)
    name = str(
        out.get("metadata", {}).get("name") or out.get("metadata", {}).get("generateName", "")
    )
    spec = out.setdefault("spec", {})
    containers = spec.get("containers") or []
    if not containers:
        raise _invalid_pod(name, "spec.containers", "Required value")
    for index, container in enumerate(containers):
        if not container.get("name"):
            raise _invalid_pod(name, f"spec.containers[{index}].name", "Required value")
        if not container.get("image"):
            raise _invalid_pod(name, f"spec.containers[{index}].image", "Required value")
    for container in containers + list(spec.get("initContainers") or []):
        _default_container(container)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    spec.setdefault("securityContext", {})
    if "tolerations" not in spec:
        spec["tolerations"] = copy.deepcopy(_TOLERATIONS)
    # The API server computes the QoS class on create (pod strategy PrepareForCreate).
    out["status"] = {"phase": "Pending", "qosClass": pod_qos_class(out)}
    return out


def admit_namespace(namespace: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(namespace)
    meta = out.setdefault("metadata", {})
    if meta.get("name"):
        labels = meta.setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = meta["name"]
    out.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    out["status"] = {"phase": "Active"}
    return out


def admit_node(node: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(node)
    out.setdefault("status", {})
    return out
