"""DELETE and DELETECOLLECTION, as kube-apiserver's generic registry does them.

Deletion options come from the query (`gracePeriodSeconds`, `dryRun`) or a
DeleteOptions body (`gracePeriodSeconds`, `preconditions` on uid and
resourceVersion: 409 Conflict worded as registry.Store words it).  Pods go
through the store's graceful deletion (deletionTimestamp, then the simulated
kubelet finishes it).

The answer is what registry.Store answers: while the object is still there
(graceful deletion under way, finalizers pending) the object as last seen;
once it is gone, the object for the resources whose registry sets
`ReturnDeletedObject` (pods) or whose DELETE only marks the object for its
finalizers (namespaces, CRDs: the sim removes those at once, but answers as
their first DELETE does; the catalog names them, `returns_deleted_object`), and
otherwise a `Status` (status Success, details with name, group, kind = the
resource, uid): nodes, events of both APIs and custom resources.  `dryRun=All` answers the same way without deleting.

The sim has no namespace or CRD controllers, so their work is done here at
once: deleting a namespace removes everything in it, deleting a CRD stops
serving its resource and removes its objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from probemarker.sim.errors import NotFound
from probemarker.sim.server.admission.crdserving import CrdController
from probemarker.sim.server.admission.writeoptions import WriteOptions, decode_body
from probemarker.sim.server.discovery.catalog import (
    CRDS,
    EVENTS_V1,
    NAMESPACES,
    Catalog,
    returns_deleted_object,
)
from probemarker.sim.server.handlers.resources import Resources
from probemarker.sim.server.request.requestinfo import RequestInfo
from probemarker.sim.server.request.status import StatusError, bad_request
from probemarker.sim.store.objects import ResourceType, Store

_UNDELETABLE_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})


def deleted_status(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """The Status registry.Store's finalizeDelete answers with: kind is the resource."""
    meta = obj.get("metadata") or {}
    details: dict[str, Any] = {"name": meta.get("name", "")}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    if meta.get("uid"):
        details["uid"] = meta["uid"]
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


class Deletions:
    """Serves delete and deletecollection; see the module docstring."""

    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        crds: CrdController,
        resources: Resources,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._catalog = catalog
        self._crds = crds
        self._resources = resources
        self._clock = clock

    def delete(
        self, rt: ResourceType, info: RequestInfo, query: Mapping[str, str], body: bytes
    ) -> dict[str, Any]:
        if WriteOptions.from_query(query).dry_run:
            current = self._resources.get(rt, info)
            pending = bool(current["metadata"].get("finalizers"))
            return current if pending or returns_deleted_object(rt) else deleted_status(rt, current)
        options = decode_body(body) if body.strip() else {}
        grace = query.get("gracePeriodSeconds")
        grace_seconds: int | None = None
        if grace is not None:
            try:
                grace_seconds = int(grace)
            except ValueError:
                raise bad_request(f'invalid gracePeriodSeconds "{grace}"') from None
        elif isinstance(options, dict) and options.get("gracePeriodSeconds") is not None:
            grace_seconds = int(options["gracePeriodSeconds"])
        srt = self._resources.storage_type(rt)
        namespace = info.namespace or None
        current = self._store.get(srt, namespace, info.name)
        if isinstance(options, dict):
            _check_preconditions(rt, info, current, options.get("preconditions") or {})
        if rt == NAMESPACES:
            if info.name in _UNDELETABLE_NAMESPACES:
                # The NamespaceLifecycle admission plugin keeps its "immortal" namespaces.
                raise StatusError(
                    403,
                    "Forbidden",
                    f'namespaces "{info.name}" is forbidden: this namespace may not be deleted',
                    details={"name": info.name, "kind": "namespaces"},
                )
            self._remove_namespace_contents(info.name)
        if rt == CRDS:
            for owned in self._crds.forget(info.name):
                self._remove_all(owned, namespace=None)
        deleted = self._store.delete(
            srt, namespace, info.name, grace_period_seconds=grace_seconds, now=self._clock()
        )
        if returns_deleted_object(rt) or self._exists(srt, namespace, info.name):
            return self._resources.to_view(rt, deleted)
        return deleted_status(rt, deleted)

    def _exists(self, rt: ResourceType, namespace: str | None, name: str) -> bool:
        try:
            self._store.get(rt, namespace, name)
        except NotFound:
            return False
        return True

    def delete_collection(
        self, rt: ResourceType, info: RequestInfo, query: Mapping[str, str]
    ) -> dict[str, Any]:
        listed = self._resources.list(rt, info, query)
        if WriteOptions.from_query(query).dry_run:
            return listed
        for item in listed["items"]:
            meta = item["metadata"]
            self._store.delete(
                self._resources.storage_type(rt),
                meta.get("namespace"),
                meta["name"],
                grace_period_seconds=None,
                now=self._clock(),
            )
        return listed

    def _remove_all(self, rt: ResourceType, *, namespace: str | None) -> None:
        result = self._store.list(
            rt,
            namespace=namespace,
            label_selector=None,
            field_selector=None,
            limit=None,
            continue_token=None,
        )
        for item in result.items:
            self._store.remove(rt, item["metadata"].get("namespace"), item["metadata"]["name"])

    def _remove_namespace_contents(self, namespace: str) -> None:
        for rt in self._catalog.types():
            if rt.namespaced and rt != EVENTS_V1:
                self._remove_all(rt, namespace=namespace)


def _check_preconditions(
    rt: ResourceType, info: RequestInfo, current: dict[str, Any], pre: dict[str, Any]
) -> None:
    meta = current.get("metadata", {})
    details = {"name": info.name, "group": rt.group, "kind": rt.plural}
    prefix = f'Operation cannot be fulfilled on {rt.qualified} "{info.name}": Precondition failed: '
    if pre.get("uid") and pre["uid"] != meta.get("uid"):
        raise StatusError(
            409,
            "Conflict",
            prefix + f"UID in precondition: {pre['uid']}, UID in object meta: {meta.get('uid')}",
            details=details,
        )
    if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
        raise StatusError(
            409,
            "Conflict",
            prefix + f"ResourceVersion in precondition: {pre['resourceVersion']}, "
            f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
            details=details,
        )
