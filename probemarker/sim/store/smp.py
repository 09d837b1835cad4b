"""Strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch) for the sim's kinds.

Lists are merged by the ``patchMergeKey`` of core/v1's ``patchStrategy:"merge"`` tags
(:data:`MERGE_KEYS`: pod containers by name, conditions by type, ports by containerPort,
...); primitive merge lists (finalizers) are unions; every other list is atomic and
replaced. Directives: ``$patch`` (merge/replace/delete, on maps and list items),
``$retainKeys``, ``$setElementOrder/<list>`` and ``$deleteFromPrimitiveList/<list>``.
An item without its merge key is refused as kube-apiserver refuses it (500 with
``map: map[...] does not contain declared merge key: name``).

Invariants: pure; inputs are never mutated; results share nothing with inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probemarker.sim.errors import ApiError, BadRequest
from probemarker.sim.store.objmeta import copy_json

__all__ = ["MERGE_KEYS", "apply_strategic_merge_patch"]

# ------------------------------------------------------------------ strategic merge patch

# (kind, path) -> merge key; path elements of list items are "[]"; a None key is a
# primitive list with the merge strategy (set union). "+retain" marks retainKeys.
_OBJECT_META: dict[str, str | None] = {
    "metadata.ownerReferences": "uid",
    "metadata.finalizers": None,
}
_CONTAINER = {
    "ports": "containerPort",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}
_POD: dict[str, str | None] = {
    **_OBJECT_META,
    "spec.volumes": "name",
    "spec.imagePullSecrets": "name",
    "spec.hostAliases": "ip",
    "spec.topologySpreadConstraints": "topologyKey",
    "spec.schedulingGates": "name",
    "spec.resourceClaims": "name",
    "status.conditions": "type",
    "status.podIPs": "ip",
    "status.hostIPs": "ip",
    "status.resourceClaimStatuses": "name",
    **{
        f"spec.{c}{suffix}": key
        for c in ("containers", "initContainers", "ephemeralContainers")
        for suffix, key in (("", "name"), *((f"[].{f}", k) for f, k in _CONTAINER.items()))
    },
}
MERGE_KEYS: dict[str, dict[str, str | None]] = {
    "Pod": _POD,
    "Node": {**_OBJECT_META, "status.conditions": "type", "status.addresses": "type",
             "spec.podCIDRs": None},
    "Namespace": {**_OBJECT_META, "status.conditions": "type"},
    "Event": dict(_OBJECT_META),
}  # fmt: skip

_SET_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def _go_format(value: Any) -> str:
    """A value as Go's %v prints decoded JSON (maps sorted, ``map[k:v]``)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_format(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_format(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Smp:
    def __init__(self, keys: dict[str, str | None]) -> None:
        self.keys = keys

    def merge_map(
        self, original: dict[str, Any], patch: Mapping[str, Any], path: str
    ) -> dict[str, Any] | None:
        """Merge ``patch`` into a copy of ``original``; None means "delete this map"."""
        directive = patch.get("$patch")
        if directive == "delete":
            return None
        if directive == "replace":
            return self.merge_map({}, {k: v for k, v in patch.items() if k != "$patch"}, path)
        if directive not in (None, "merge"):
            raise BadRequest(f"Unknown patch type: {directive} in map: {_go_format(dict(patch))}")
        out = dict(original)
        retain = patch.get("$retainKeys")
        if retain is not None:
            if not isinstance(retain, list):
                raise BadRequest("invalid patch: $retainKeys must be a list")
            out = {k: v for k, v in out.items() if k in retain}
        orders: dict[str, list[Any]] = {}
        for k, v in patch.items():
            if k in ("$patch", "$retainKeys"):
                continue
            if k.startswith(_SET_ORDER):
                orders[k[len(_SET_ORDER) :]] = v if isinstance(v, list) else []
                continue
            if k.startswith(_DELETE_PRIMITIVE):
                field = k[len(_DELETE_PRIMITIVE) :]
                if isinstance(out.get(field), list) and isinstance(v, list):
                    out[field] = [x for x in out[field] if x not in v]
                continue
            if v is None:
                out.pop(k, None)
                continue
            merged = self.merge_value(out.get(k), v, f"{path}.{k}" if path else k)
            if merged is _DELETE:
                out.pop(k, None)
            else:
                out[k] = merged
        for field, order in orders.items():
            child = f"{path}.{field}" if path else field
            if isinstance(out.get(field), list):
                out[field] = self.reorder(out[field], order, self.keys.get(child))
        return out

    def merge_value(self, original: Any, patch: Any, path: str) -> Any:
        if isinstance(patch, dict):
            merged = self.merge_map(original if isinstance(original, dict) else {}, patch, path)
            return _DELETE if merged is None else merged
        if isinstance(patch, list):
            if path in self.keys:
                return self.merge_list(original if isinstance(original, list) else [], patch, path)
            return [self.strip(v, f"{path}[]") for v in patch]
        return copy_json(patch)

    def strip(self, value: Any, path: str) -> Any:
        """A patch value with directives applied against nothing."""
        if isinstance(value, dict):
            merged = self.merge_map({}, value, path)
            return {} if merged is None else merged
        return copy_json(value)

    def merge_list(self, original: list[Any], patch: list[Any], path: str) -> list[Any]:
        key = self.keys[path]
        if key is None:
            out = list(original)
            for v in patch:
                if v not in out:
                    out.append(copy_json(v))
            return out
        items = [
            p
            for p in patch
            if not (isinstance(p, dict) and p.get("$patch") == "replace" and len(p) == 1)
        ]
        if len(items) != len(patch):
            original = []
        out = list(original)
        for p in items:
            if not isinstance(p, dict):
                raise BadRequest(f"invalid patch: list {path} needs maps with merge key {key}")
            if key not in p:
                raise ApiError(
                    code=500,
                    reason="",
                    message=f"map: {_go_format(p)} does not contain declared merge key: {key}",
                )
            idx = next(
                (i for i, o in enumerate(out) if isinstance(o, dict) and o.get(key) == p[key]), None
            )
            if p.get("$patch") == "delete":
                out = [o for o in out if not (isinstance(o, dict) and o.get(key) == p[key])]
            elif idx is None:
                out.append(self.strip(p, f"{path}[]"))
            else:
                merged = self.merge_map(out[idx], p, f"{path}[]")
                if merged is None:
                    del out[idx]
                else:
                    out[idx] = merged
        return out

    @staticmethod
    def reorder(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
        def ident(item: Any) -> Any:
            return item.get(key) if key is not None and isinstance(item, dict) else item

        ranked = {
            _freeze(o.get(key) if key is not None and isinstance(o, dict) else o): i
            for i, o in enumerate(order)
        }
        listed = sorted(
            (i for i in items if _freeze(ident(i)) in ranked),
            key=lambda i: ranked[_freeze(ident(i))],
        )
        rest = [i for i in items if _freeze(ident(i)) not in ranked]
        return listed + rest


def _freeze(value: Any) -> Any:
    if isinstance(value, dict | list):
        return repr(value)
    return value


_DELETE: Any = object()


def apply_strategic_merge_patch(doc: Mapping[str, Any], patch: Any, *, kind: str) -> dict[str, Any]:
    """Apply a strategic merge patch to an object of ``kind`` (core/v1 merge keys; other
    kinds merge maps and replace lists)."""
    if not isinstance(patch, dict):
        raise BadRequest("unable to find api field in struct")
    merged = _Smp(MERGE_KEYS.get(kind, dict(_OBJECT_META))).merge_map(
        copy_json(dict(doc)), patch, ""
    )
    out = copy_json(merged if merged is not None else {})
    assert isinstance(out, dict)
    return out
