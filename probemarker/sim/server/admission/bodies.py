"""What a create, update or patch request body becomes before the store writes it.

As kube-apiserver's generic registry handlers and admission do:

* the body must be a JSON object whose apiVersion and kind, when set, are the URL's
  (400), and a namespaced object takes the URL's namespace (a different one is 400);
* create admission per kind: pods, namespaces and nodes get their defaults
  (`kinds/defaults.py`), CRDs are decoded (strictly, per `fieldValidation`), defaulted
  and checked (`crdserving.py`), events validated (`kinds/eventcheck.py`), custom resources
  pruned, defaulted and validated against their schema;
* update admission: a custom resource is admitted against the stored object (a
  ``status`` write takes only status and metadata, a main write keeps the stored
  status when the status subresource is on), a CRD is decoded and checked against the
  stored one (a patch's decode errors are 422s on `patch`), an event validated against
  the stored one;
* `dryRun=All` create: identity checks only (404 without the namespace, 409 when the
  name is taken), then the answer create would give;
* patch: json-patch and merge-patch for every kind, strategic-merge-patch for built-in
  kinds only (415 otherwise, listing the accepted types; no apply-patch, as a server
  without server-side apply), applied to the current object; the result keeps the
  current resourceVersion unless the patch set one, so it stays a precondition.

events.k8s.io/v1 objects are stored as core/v1 events (:func:`storage_type`,
:func:`to_view`, :func:`from_view`, converted by `kinds/eventconv.py`).

Invariants: request bodies are never mutated (``check_body`` works on a deep copy);
nothing here writes to the store.
"""

from __future__ import annotations

import copy
import secrets
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from probemarker.sim.errors import ApiError
from probemarker.sim.server.admission.crdserving import CrdController
from probemarker.sim.server.admission.writeoptions import WriteOptions, decode_body
from probemarker.sim.server.discovery.catalog import (
    CRDS,
    EVENTS,
    EVENTS_V1,
    NAMESPACES,
    NODES,
    PODS,
)
from probemarker.sim.server.discovery.catalog import group_version as gv_of
from probemarker.sim.server.kinds import eventconv
from probemarker.sim.server.kinds.defaults import admit_namespace, admit_node, admit_pod
from probemarker.sim.server.kinds.eventcheck import check_event_create, check_event_update
from probemarker.sim.server.request.requestinfo import RequestInfo
from probemarker.sim.server.request.status import StatusError, bad_request, unsupported_media_type
from probemarker.sim.store.objects import ResourceType, Store
from probemarker.sim.store.patch import (
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)

__all__ = [
    "APPLY_PATCH",
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_PATCH",
    "admit_create",
    "admit_update",
    "apply_patch",
    "bind_namespace",
    "check_body",
    "decode_patch",
    "dry_run_create",
    "from_view",
    "storage_type",
    "to_view",
]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def storage_type(rt: ResourceType) -> ResourceType:
    """The type ``rt``'s objects are stored as."""
    return EVENTS if rt == EVENTS_V1 else rt


def to_view(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """A stored object as served at ``rt``."""
    return eventconv.from_core(obj) if rt == EVENTS_V1 else obj


def from_view(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """An object served at ``rt`` in its stored form."""
    return eventconv.to_core(obj) if rt == EVENTS_V1 else obj


def check_body(rt: ResourceType, body: Any) -> dict[str, Any]:
    """A deep copy of a create or update body, with ``rt``'s apiVersion and kind."""
    if not isinstance(body, dict):
        raise bad_request("the body of the request was not a JSON object")
    obj = copy.deepcopy(body)
    api_version = obj.get("apiVersion")
    expected = gv_of(rt)
    if api_version and api_version != expected:
        raise bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({expected})"
        )
    kind = obj.get("kind")
    if kind and kind != rt.kind:
        raise bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
        )
    obj["apiVersion"] = expected
    obj["kind"] = rt.kind
    return obj


def bind_namespace(rt: ResourceType, info: RequestInfo, meta: dict[str, Any]) -> None:
    """A namespaced object takes the URL's namespace; a different one in the body is refused."""
    if not rt.namespaced:
        return
    if meta.get("namespace") and meta["namespace"] != info.namespace:
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    meta["namespace"] = info.namespace


def admit_create(
    rt: ResourceType, obj: dict[str, Any], options: WriteOptions, *, crds: CrdController
) -> dict[str, Any]:
    """``obj`` as create admission leaves it (defaulted, checked, schema-admitted)."""
    if rt == PODS:
        return admit_pod(obj)
    if rt == NAMESPACES:
        return admit_namespace(obj)
    if rt == NODES:
        return admit_node(obj)
    if rt == CRDS:
        return crds.check_crd(
            obj, field_validation=options.field_validation, warnings=options.warnings
        )
    if rt in (EVENTS, EVENTS_V1):
        check_event_create(from_view(rt, obj), strict=rt == EVENTS_V1)
    if rt.is_custom:
        return crds.admit(
            rt,
            obj,
            old=None,
            field_validation=options.field_validation,
            warnings=options.warnings,
        )
    return obj


def dry_run_create(
    rt: ResourceType,
    info: RequestInfo,
    obj: dict[str, Any],
    *,
    store: Store,
    clock: Callable[[], datetime],
) -> dict[str, Any]:
    """What create would return, without storing (dryRun=All): identity checks only."""
    meta = obj["metadata"]
    if info.namespace:
        store.get(NAMESPACES, None, info.namespace)  # 404 when the namespace is absent
    if meta.get("name"):
        try:
            store.get(storage_type(rt), info.namespace or None, meta["name"])
        except ApiError:
            pass
        else:
            raise StatusError(
                409,
                "AlreadyExists",
                f'{rt.qualified} "{meta["name"]}" already exists',
                details={"name": meta["name"], "group": rt.group, "kind": rt.plural},
            )
    if not meta.get("name"):
        suffix = "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
        meta["name"] = str(meta.get("generateName", "")) + suffix
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = clock().strftime("%Y-%m-%dT%H:%M:%SZ")
    if rt.is_custom:
        meta["generation"] = 1
    return obj


def admit_update(
    rt: ResourceType,
    info: RequestInfo,
    obj: dict[str, Any],
    options: WriteOptions,
    *,
    store: Store,
    crds: CrdController,
) -> dict[str, Any]:
    """``obj`` (a PUT body or a patch result) as update admission leaves it."""
    srt = storage_type(rt)
    sub = info.subresource or None
    if rt.is_custom:
        old = store.get(srt, info.namespace or None, info.name)
        candidate = copy.deepcopy(old)
        if sub == "status":
            candidate["status"] = obj.get("status")
            candidate["metadata"] = obj.get("metadata", old.get("metadata"))
        else:
            candidate = obj
            if "status" in rt.subresources:
                candidate = dict(obj)
                if "status" in old:
                    candidate["status"] = old["status"]
                else:
                    candidate.pop("status", None)
        obj = crds.admit(
            rt,
            candidate,
            old=old,
            field_validation=options.field_validation,
            warnings=options.warnings,
        )
    elif rt == CRDS and sub is None:
        obj = crds.check_crd(
            obj,
            old=store.get(srt, None, info.name),
            field_validation=options.field_validation,
            warnings=options.warnings,
            patch=info.verb == "patch",
        )
    elif rt in (EVENTS, EVENTS_V1):
        old = store.get(srt, info.namespace or None, info.name)
        check_event_update(from_view(rt, obj), old, strict=rt == EVENTS_V1)
    return obj


def decode_patch(rt: ResourceType, content_type: str, body: bytes) -> Any:
    """The patch a PATCH body holds, if ``rt`` accepts its content type (else 415)."""
    # The sim has no server-side apply: it answers as a server without it does
    # (installer.go lists the patch types it serves), so apply-patch is not offered.
    accepted = [JSON_PATCH, MERGE_PATCH]
    if not rt.is_custom:
        accepted.append(STRATEGIC_PATCH)
    if content_type not in accepted:
        raise unsupported_media_type(content_type, accepted)
    return decode_body(body)


def apply_patch(
    rt: ResourceType, content_type: str, patch: Any, current: dict[str, Any]
) -> dict[str, Any]:
    """``current`` with ``patch`` applied, keeping its resourceVersion unless the patch
    set one."""
    if content_type == JSON_PATCH:
        if not isinstance(patch, list):
            raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        patched = apply_json_patch(current, patch)
    elif content_type == MERGE_PATCH:
        patched = apply_merge_patch(current, patch)
    else:
        patched = apply_strategic_merge_patch(current, patch, kind=rt.kind)
    meta = patched.setdefault("metadata", {})
    if not meta.get("resourceVersion"):
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]
    return patched
