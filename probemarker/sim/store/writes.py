"""The object each store write keeps, computed from the request and the stored state.

Kubernetes behaviour followed (generic registry + :mod:`probemarker.sim.store.strategy`):
create sets uid/creationTimestamp and generation 1 where tracked, drops the system
fields a client may not set, fills generateName with 5 random chars, refuses duplicates
(409), missing namespaces (404) and namespaces being terminated (403); update enforces
resourceVersion preconditions (409) and AllowUnconditionalUpdate, keeps system
metadata, keeps status on main writes and spec on ``status`` writes and bumps
generation on spec changes; every create and update is validated (the name on create,
then :mod:`probemarker.sim.store.validation`: labels, annotations, pod spec
immutability, pod condition types) with a 422 Invalid; a delete marks the object with
deletionTimestamp and deletionGracePeriodSeconds, and a second one may only shorten
the grace period (rest.BeforeDelete).

Invariants: inputs are never mutated (results are new dicts, sharing unchanged
sub-objects); nothing is stored here: the store stamps the resourceVersion and commits.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from probemarker.sim.errors import AlreadyExists, BadRequest, Forbidden, Invalid, NotFound
from probemarker.sim.store import strategy
from probemarker.sim.store.objmeta import (
    copy_json,
    format_time,
    name_causes,
    parse_time,
    prune_empty,
)
from probemarker.sim.store.resourcetype import ResourceType, object_key
from probemarker.sim.store.validation import validate_write

__all__ = ["deletion_marked", "grace_shortened", "prepare_create", "prepare_update"]

_GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def prepare_create(
    rt: ResourceType,
    obj: Mapping[str, Any],
    *,
    namespace: str | None,
    namespaces: Mapping[str, dict[str, Any]],
    existing: Mapping[str, dict[str, Any]],
    clock: Callable[[], datetime],
    rng: random.Random,
    pod_generation: bool,
) -> tuple[str, dict[str, Any]]:
    """(key, object) a create of ``obj`` stores, given the stored ``namespaces`` and
    ``rt``'s ``existing`` objects (both by key)."""
    new: dict[str, Any] = copy_json(dict(obj))
    meta = new["metadata"] = dict(new.get("metadata") or {})
    ns = _create_namespace(rt, meta, namespace, namespaces)
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = _generate_name(existing, ns, str(meta["generateName"]), rng)
    name = str(meta.get("name") or "")
    causes = name_causes(name, namespace_like=rt.group == "" and rt.plural == "namespaces")
    causes += validate_write(rt, new, old=None)
    if causes:
        raise Invalid(rt.kind, rt.group, name, causes)
    key = object_key(ns, name)
    if key in existing:
        raise AlreadyExists(rt.qualified, name)
    for system_field in (
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "resourceVersion",
    ):
        meta.pop(system_field, None)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = format_time(clock())
    if strategy.has_generation(rt, pods=pod_generation):
        meta["generation"] = 1
    else:
        meta.pop("generation", None)
    if rt.is_custom and "status" in rt.subresources:
        new.pop("status", None)  # customResourceStrategy.PrepareForCreate
    new["apiVersion"], new["kind"] = rt.api_version, rt.kind
    return key, new


def prepare_update(
    rt: ResourceType,
    old: dict[str, Any],
    obj: Mapping[str, Any],
    *,
    name: str,
    subresource: str | None,
    pod_generation: bool,
) -> dict[str, Any]:
    """The object a PUT of ``obj`` (or of its ``status``) over the stored ``old`` would
    store: preconditions checked, the write strategy applied, validated."""
    new: dict[str, Any] = copy_json(dict(obj))
    meta = new["metadata"] = dict(new.get("metadata") or {})
    if meta.get("name") and meta["name"] != name:
        raise BadRequest(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
        )
    strategy.check_preconditions(rt, old, meta, name)
    if subresource == "status":
        new = strategy.status_write(rt, old, new)
    elif subresource is None:
        new = strategy.main_write(rt, old, new)
    else:
        raise BadRequest(f"the server does not support updating the {subresource} subresource")
    new = strategy.keep_system_meta(rt, old, new)
    if (
        subresource is None
        and strategy.has_generation(rt, pods=pod_generation)
        and strategy.spec_view(rt, new) != strategy.spec_view(rt, old)
    ):
        new["metadata"]["generation"] = int(old["metadata"].get("generation") or 0) + 1
    if not rt.is_custom:
        new = prune_empty(new)
    causes = validate_write(rt, new, old=old, subresource=subresource)
    if causes:
        raise Invalid(rt.kind, rt.group, name, causes)
    return new


def deletion_marked(old: dict[str, Any], period: int, *, when: datetime) -> dict[str, Any]:
    """``old`` marked deleted, to be gone ``period`` seconds after ``when``."""
    new_meta = dict(old["metadata"])
    new_meta["deletionTimestamp"] = format_time(when + timedelta(seconds=period))
    new_meta["deletionGracePeriodSeconds"] = period
    if int(new_meta.get("generation") or 0) > 0:
        new_meta["generation"] = int(new_meta["generation"]) + 1  # rest.BeforeDelete
    return dict(old, metadata=new_meta)


def grace_shortened(old: dict[str, Any], period: int, *, current: int) -> dict[str, Any]:
    """``old``, marked deleted with grace ``current``, with the shorter grace ``period``:
    its deletionTimestamp moves earlier by the difference."""
    meta = old["metadata"]
    deadline = parse_time(meta["deletionTimestamp"]) - timedelta(seconds=current - period)
    return dict(
        old,
        metadata=dict(
            meta, deletionTimestamp=format_time(deadline), deletionGracePeriodSeconds=period
        ),
    )


def _create_namespace(
    rt: ResourceType,
    meta: dict[str, Any],
    namespace: str | None,
    namespaces: Mapping[str, dict[str, Any]],
) -> str | None:
    if not rt.namespaced:
        meta.pop("namespace", None)
        return None
    ns = str(namespace or meta.get("namespace") or "")
    if meta.get("namespace") and meta["namespace"] != ns:
        raise BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    if not ns:
        raise BadRequest("an empty namespace may not be set during creation")
    meta["namespace"] = ns
    ns_obj = namespaces.get(ns)
    if ns_obj is None:
        raise NotFound("namespaces", ns)
    if ns_obj["metadata"].get("deletionTimestamp"):
        raise Forbidden(
            rt.qualified,
            str(meta.get("name") or ""),
            f"unable to create new content in namespace {ns} because it is being terminated",
        )
    return ns


def _generate_name(
    existing: Mapping[str, dict[str, Any]], namespace: str | None, base: str, rng: random.Random
) -> str:
    name = ""
    for _ in range(8):  # kube-apiserver retries a colliding generated name
        name = base[:58] + "".join(rng.choice(_GENERATE_CHARS) for _ in range(5))
        if object_key(namespace, name) not in existing:
            break
    return name
