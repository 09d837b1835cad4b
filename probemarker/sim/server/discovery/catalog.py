"""The served resource catalog and the legacy discovery documents built from it.

`Catalog` holds every `ResourceType` the sim serves: the built-in ones
(namespaces, pods, nodes, core/v1 and events.k8s.io/v1 events,
customresourcedefinitions) and those of established CRDs, added and removed at
run time; `returns_deleted_object` says what a DELETE of each answers.  From it
come the documents of Kubernetes' *legacy* discovery: `/api` (APIVersions),
`/apis` (APIGroupList), `/apis/<g>` (APIGroup) and `/api/v1`, `/apis/<g>/<v>`
(APIResourceList).

Aggregated discovery (apidiscovery.k8s.io/v2) is deliberately not offered:
the server answers those requests with plain `application/json`, which
client-go reads as "not aggregated" and falls back to the documents here,
exactly as it does with older API servers.

Invariants: group order in `/apis` is the order groups were first added
(built-ins first, as kube-apiserver lists them before CRD groups); within a
group-version, resources are listed by name; a group-version disappears from
discovery when its last resource is removed.
"""

from __future__ import annotations

from typing import Any

from probemarker.sim.store.objects import ResourceType

RESOURCE_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
STATUS_VERBS = ["get", "patch", "update"]


def _builtin(
    group: str,
    plural: str,
    kind: str,
    *,
    namespaced: bool,
    subresources: tuple[str, ...] = (),
    short_names: tuple[str, ...] = (),
) -> ResourceType:
    return ResourceType(
        group=group,
        version="v1",
        plural=plural,
        kind=kind,
        namespaced=namespaced,
        subresources=frozenset(subresources),
        short_names=short_names,
        singular=kind.lower(),
        is_custom=False,
    )


NAMESPACES = _builtin(
    "", "namespaces", "Namespace", namespaced=False, subresources=("status",), short_names=("ns",)
)
PODS = _builtin(
    "",
    "pods",
    "Pod",
    namespaced=True,
    subresources=("status", "exec", "proxy"),
    short_names=("po",),
)
NODES = _builtin(
    "", "nodes", "Node", namespaced=False, subresources=("status",), short_names=("no",)
)
EVENTS = _builtin("", "events", "Event", namespaced=True, short_names=("ev",))
EVENTS_V1 = _builtin("events.k8s.io", "events", "Event", namespaced=True, short_names=("ev",))
CRDS = _builtin(
    "apiextensions.k8s.io",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
    subresources=("status",),
    short_names=("crd", "crds"),
)
BUILTINS: tuple[ResourceType, ...] = (NAMESPACES, PODS, NODES, EVENTS, EVENTS_V1, CRDS)
_RETURN_OBJECT = frozenset(
    {("", "pods"), ("", "namespaces"), ("apiextensions.k8s.io", "customresourcedefinitions")}
)

# Kind of each subresource in discovery, as kube-apiserver reports it.
_SUBRESOURCE_KINDS = {"exec": "PodExecOptions", "proxy": "PodProxyOptions"}
_SUBRESOURCE_VERBS = {
    "exec": ["create", "get"],
    "proxy": ["create", "delete", "get", "patch", "update"],
}
_CATEGORIES = {("", "pods"): ["all"]}


def group_version(rt: ResourceType) -> str:
    return f"{rt.group}/{rt.version}" if rt.group else rt.version


def returns_deleted_object(rt: ResourceType) -> bool:
    """Whether a DELETE that removed an object of `rt` answers with the object (else with a
    Status): pods, whose registry sets ReturnDeletedObject, and namespaces and CRDs, whose
    DELETE marks them for their finalizers (the DELETE handler answers so, and the OpenAPI
    documents say so)."""
    return (rt.group, rt.plural) in _RETURN_OBJECT


class Catalog:
    """The resource types being served; see the module docstring."""

    def __init__(self, types: tuple[ResourceType, ...] = BUILTINS) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._group_order: list[str] = []
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._types[(rt.group, rt.version, rt.plural)] = rt
        if rt.group and rt.group not in self._group_order:
            self._group_order.append(rt.group)

    def remove(self, rt: ResourceType) -> None:
        self._types.pop((rt.group, rt.version, rt.plural), None)
        if rt.group and not any(t.group == rt.group for t in self._types.values()):
            self._group_order.remove(rt.group)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def types(self) -> list[ResourceType]:
        return list(self._types.values())

    def versions(self, group: str) -> list[str]:
        found: list[str] = []
        for rt in self._types.values():
            if rt.group == group and rt.version not in found:
                found.append(rt.version)
        return found

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return sorted(
            (rt for rt in self._types.values() if rt.group == group and rt.version == version),
            key=lambda rt: rt.plural,
        )

    # -- documents -------------------------------------------------------------------

    def api_versions(self, server_address: str) -> dict[str, Any]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
            ],
        }

    def api_group(self, group: str) -> dict[str, Any] | None:
        versions = self.versions(group)
        if not group or not versions:
            return None
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": entries,
            "preferredVersion": entries[0],
        }

    def api_group_list(self) -> dict[str, Any]:
        groups = [self.api_group(g) for g in self._group_order]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [g for g in groups if g]}

    def api_resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        types = self.in_group_version(group, version)
        if not types:
            return None
        resources: list[dict[str, Any]] = []
        for rt in types:
            resources.append(_resource_entry(rt))
            for sub in sorted(rt.subresources):
                resources.append(
                    {
                        "name": f"{rt.plural}/{sub}",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "kind": _SUBRESOURCE_KINDS.get(sub, rt.kind),
                        "verbs": _SUBRESOURCE_VERBS.get(sub, STATUS_VERBS),
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }


def _resource_entry(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": RESOURCE_VERBS
        if rt.plural != "namespaces"
        else [v for v in RESOURCE_VERBS if v != "deletecollection"],
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    categories = _CATEGORIES.get((rt.group, rt.plural))
    if categories:
        entry["categories"] = categories
    return entry
