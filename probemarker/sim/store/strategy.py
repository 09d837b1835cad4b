"""Per-kind write rules of the API server's registry strategies, as pure functions.

Follows k8s.io/apiserver rest.BeforeUpdate/BeforeDelete and the strategies of pods
(pkg/registry/core/pod/strategy.go), custom resources
(apiextensions-apiserver customresource/strategy.go) and the generic status strategies
(metav1.ResetObjectMetaForStatus):

* which kinds track ``metadata.generation`` and what a bump compares;
* which kinds allow an update without ``metadata.resourceVersion``;
* what a ``status`` write keeps from the stored object (pods keep the new labels and
  annotations but not ownerReferences; custom resources take only ``status``; other
  kinds reset all user metadata);
* the preconditions of an update (uid, resourceVersion) and their 409/422 refusals;
* the system metadata an update can never change;
* a pod's deletion grace period.

Invariants: pure; inputs are never mutated (results may share unchanged sub-objects).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probemarker.sim.errors import Conflict, Invalid, StatusCause
from probemarker.sim.store.resourcetype import ResourceType

__all__ = [
    "allows_unconditional_update",
    "check_preconditions",
    "grace_period",
    "has_generation",
    "keep_system_meta",
    "namespace_object",
    "spec_view",
    "status_write",
]

_SYSTEM_META = ("uid", "creationTimestamp", "name", "namespace", "generation", "deletionTimestamp")


def has_generation(rt: ResourceType, *, pods: bool) -> bool:
    """Custom resources and CRDs always track generation; pods do from Kubernetes 1.33."""
    if rt.is_custom or (
        rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions"
    ):
        return True
    return pods and rt.is_pod


def allows_unconditional_update(rt: ResourceType) -> bool:
    """``AllowUnconditionalUpdate``: false for custom resources and CRDs."""
    return not (rt.is_custom or rt.group == "apiextensions.k8s.io")


def spec_view(rt: ResourceType, obj: Mapping[str, Any]) -> Any:
    """What a generation bump compares: the spec (built-ins), or everything but metadata
    (status is already reset when it is a subresource) for custom resources."""
    if rt.is_custom:
        return {k: v for k, v in obj.items() if k != "metadata"}
    return obj.get("spec")


def status_write(
    rt: ResourceType, old: Mapping[str, Any], new: Mapping[str, Any]
) -> dict[str, Any]:
    """The object a ``status`` subresource write stores (before system metadata)."""
    if rt.is_custom:
        out = {k: v for k, v in old.items() if k != "status"}
        if "status" in new:
            out["status"] = new["status"]
        return out
    out = {k: v for k, v in new.items() if k != "spec"}
    if "spec" in old:
        out["spec"] = old["spec"]
    meta = dict(new.get("metadata") or {})
    old_meta = old["metadata"]
    if rt.is_pod:
        keep: tuple[str, ...] = ("ownerReferences",)
    else:
        keep = ("labels", "annotations", "finalizers", "ownerReferences", "generation")
    for k in keep:
        meta.pop(k, None)
        if k in old_meta:
            meta[k] = old_meta[k]
    out["metadata"] = meta
    status = out.get("status")
    if rt.is_pod and isinstance(status, dict):
        old_qos = (old.get("status") or {}).get("qosClass")
        if old_qos and not status.get("qosClass"):
            out["status"] = dict(status, qosClass=old_qos)
    return out


def main_write(rt: ResourceType, old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A main-resource write keeps the stored status when status is a subresource."""
    if "status" not in rt.subresources:
        return dict(new)
    out = {k: v for k, v in new.items() if k != "status"}
    if "status" in old:
        out["status"] = old["status"]
    return out


def keep_system_meta(
    rt: ResourceType, old: Mapping[str, Any], new: Mapping[str, Any]
) -> dict[str, Any]:
    """rest.BeforeUpdate: uid, creationTimestamp, generation, deletion fields, identity and
    resourceVersion come from the stored object."""
    old_meta = old["metadata"]
    meta = dict(new.get("metadata") or {})
    for k in _SYSTEM_META:
        meta.pop(k, None)
        if k in old_meta:
            meta[k] = old_meta[k]
    if "deletionGracePeriodSeconds" in old_meta and meta.get("deletionGracePeriodSeconds") is None:
        meta["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"]
    meta.pop("selfLink", None)
    meta["resourceVersion"] = old_meta["resourceVersion"]
    out = dict(new)
    out["metadata"] = meta
    out["apiVersion"], out["kind"] = old.get("apiVersion", rt.api_version), rt.kind
    return out


def grace_period(rt: ResourceType, obj: Mapping[str, Any], requested: int | None) -> int:
    """podStrategy.CheckGracefulDelete; 0 (immediate) for every other kind."""
    if not rt.is_pod:
        return 0
    spec = obj.get("spec") or {}
    period = (
        requested if requested is not None else int(spec.get("terminationGracePeriodSeconds", 30))
    )
    if not spec.get("nodeName"):
        period = 0
    if (obj.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
        period = 0
    return 1 if period < 0 else period


def namespace_object(name: str) -> dict[str, Any]:
    """A namespace as kube-apiserver creates the built-in ones."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def check_preconditions(
    rt: ResourceType, old: Mapping[str, Any], meta: Mapping[str, Any], name: str
) -> None:
    """An update's preconditions: a given uid must match (409), a given resourceVersion
    must be current (409), and kinds that refuse unconditional updates need one (422)."""
    old_meta = old["metadata"]
    if meta.get("uid") and meta["uid"] != old_meta.get("uid"):
        raise Conflict(
            rt.qualified,
            name,
            f"Precondition failed: UID in precondition: {meta['uid']}, "
            f"UID in object meta: {old_meta.get('uid')}",
        )
    rv = meta.get("resourceVersion")
    if rv:
        if str(rv) != old_meta["resourceVersion"]:
            raise Conflict(rt.qualified, name)
    elif not allows_unconditional_update(rt):
        cause = StatusCause(
            "FieldValueInvalid", "Invalid value: 0: must be specified for an update",
            "metadata.resourceVersion",
        )  # fmt: skip
        # registry.Store.Update names the resource, not the kind, in this error.
        raise Invalid(rt.plural, rt.group, name, [cause])
