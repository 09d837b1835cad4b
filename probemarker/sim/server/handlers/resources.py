"""Handlers of the resource API's reads and writes: get, list, create, update, patch.

Maps a parsed request (`RequestInfo` + body + query) onto the store, the way
kube-apiserver's generic registry handlers do:

* create: 201, body namespace must match the URL's, kind defaults applied
  (`kinds/defaults.py`), custom resources admitted through their schema, CRDs
  checked and then established;
* update (PUT) and patch: the patch is applied to the current object and the
  result written as an update, all without awaiting in between, so a patch
  never conflicts with itself (kube-apiserver retries such patches); a
  resourceVersion the client sent stays a precondition (409 when stale);
* patch types: json-patch, merge-patch, strategic-merge-patch (built-in kinds
  only, as for custom resources kube-apiserver answers 415); apply-patch is
  refused with 415 listing the others, as a server without server-side apply;
* `dryRun=All` computes the answer without storing; `fieldValidation`
  (Strict/Warn/Ignore) applies to custom resources' unknown fields; `dryRun`,
  `fieldValidation` and `fieldManager` are validated as kube-apiserver does
  (422 on `PatchOptions.meta.k8s.io ""` etc.).

Request bodies are checked and admitted in `admission/bodies.py`, write options parsed
in `admission/writeoptions.py`; deletion is in deletion.py.

events.k8s.io/v1 requests are served from the core/v1 events the store keeps,
converted at the edge (`kinds/eventconv.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

from probemarker.sim.server.admission import bodies
from probemarker.sim.server.admission.crdserving import CrdController
from probemarker.sim.server.admission.writeoptions import WriteOptions
from probemarker.sim.server.discovery.catalog import CRDS, EVENTS_V1, NAMESPACES, PODS, Catalog
from probemarker.sim.server.discovery.catalog import group_version as gv_of
from probemarker.sim.server.kinds import eventconv
from probemarker.sim.server.request.requestinfo import RequestInfo
from probemarker.sim.server.request.status import StatusError, bad_request
from probemarker.sim.store.listopts import list_read
from probemarker.sim.store.objects import ResourceType, Store

__all__ = ["PodBinder", "Resources"]


class PodBinder(Protocol):
    """What binds a pod as it is created: the sim's scheduler (kubelet/scheduler.py), which
    `SimCluster` hands in when it has one."""

    def bind(self, pod: dict[str, Any]) -> str | None:
        """Set `spec.nodeName` of a pod about to be created; the node, or None."""

    def record(self, pod: dict[str, Any], node: str | None) -> None:
        """Write what the binding of the created pod leaves behind (its events)."""


class Resources:
    """Serves the CRUD verbs for every type in the catalog."""

    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        crds: CrdController,
        clock: Callable[[], datetime],
        scheduler: PodBinder | None = None,
    ) -> None:
        self._scheduler = scheduler
        self._store = store
        self._catalog = catalog
        self._crds = crds
        self._clock = clock

    # -- type resolution and views -------------------------------------------------

    def resolve(self, info: RequestInfo) -> ResourceType:
        rt = self._catalog.lookup(info.group, info.version, info.resource)
        if rt is None or (info.subresource and info.subresource not in rt.subresources):
            raise StatusError(404, "NotFound", "the server could not find the requested resource")
        if rt.namespaced and not info.namespace and info.verb not in ("list", "watch"):
            raise StatusError(404, "NotFound", "the server could not find the requested resource")
        if not rt.namespaced and info.namespace and rt != NAMESPACES:
            raise StatusError(404, "NotFound", "the server could not find the requested resource")
        return rt

    storage_type = staticmethod(bodies.storage_type)
    to_view = staticmethod(bodies.to_view)
    from_view = staticmethod(bodies.from_view)

    # -- verbs -----------------------------------------------------------------------

    def get(self, rt: ResourceType, info: RequestInfo) -> dict[str, Any]:
        obj = self._store.get(self.storage_type(rt), info.namespace or None, info.name)
        return self.to_view(rt, obj)

    def list(self, rt: ResourceType, info: RequestInfo, query: Mapping[str, str]) -> dict[str, Any]:
        """A LIST page as the API server reads it (:func:`list_read`); the caller has
        awaited :meth:`Store.wait_fresh` for a "not older than" version."""
        field_selector = query.get("fieldSelector") or None
        if field_selector and rt == EVENTS_V1:
            field_selector = eventconv.field_selector_to_core(field_selector)
        limit_text = query.get("limit")
        try:
            limit = int(limit_text) if limit_text else None
        except ValueError:
            raise bad_request(f'invalid limit "{limit_text}"') from None
        limit = limit if limit and limit > 0 else None
        continue_token = query.get("continue") or None
        read = list_read(query, limit=limit, continue_token=continue_token)
        if read.unpaged:
            limit = None
        result = self._store.list(
            self.storage_type(rt),
            namespace=info.namespace or None,
            label_selector=query.get("labelSelector") or None,
            field_selector=field_selector,
            limit=limit,
            continue_token=continue_token,
            exact_rv=read.exact,
        )
        meta: dict[str, Any] = {"resourceVersion": str(result.resource_version)}
        if result.continue_token:
            meta["continue"] = result.continue_token
            if result.remaining:
                meta["remainingItemCount"] = result.remaining
        return {
            "kind": f"{rt.kind}List",
            "apiVersion": gv_of(rt),
            "metadata": meta,
            "items": [self.to_view(rt, item) for item in result.items],
        }

    def create(
        self, rt: ResourceType, info: RequestInfo, body: Any, options: WriteOptions
    ) -> dict[str, Any]:
        obj = bodies.check_body(rt, body)
        meta = obj.setdefault("metadata", {})
        bodies.bind_namespace(rt, info, meta)
        # A CRD without a name is refused by its validation, with its other errors (422).
        if not meta.get("name") and not meta.get("generateName") and rt != CRDS:
            raise StatusError(
                422 if rt.is_custom else 400,
                "Invalid" if rt.is_custom else "BadRequest",
                "name or generateName is required"
                if rt.is_custom
                else "resource name may not be empty",
            )
        obj = bodies.admit_create(rt, obj, options, crds=self._crds)
        if options.dry_run:
            return bodies.dry_run_create(rt, info, obj, store=self._store, clock=self._clock)
        scheduling = rt == PODS and self._scheduler is not None and not _node_name(obj)
        node = self._scheduler.bind(obj) if scheduling and self._scheduler else None
        created = self._store.create(
            self.storage_type(rt), self.from_view(rt, obj), namespace=info.namespace or None
        )
        if scheduling and self._scheduler is not None:
            self._scheduler.record(created, node)
        if rt == CRDS:
            created = self._crds.establish(created)
        return self.to_view(rt, created)

    def update(
        self, rt: ResourceType, info: RequestInfo, body: Any, options: WriteOptions
    ) -> dict[str, Any]:
        obj = bodies.check_body(rt, body)
        meta = obj.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != info.name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({info.name})"
            )
        meta["name"] = info.name
        bodies.bind_namespace(rt, info, meta)
        return self._write(rt, info, obj, options)

    def patch(
        self,
        rt: ResourceType,
        info: RequestInfo,
        content_type: str,
        body: bytes,
        options: WriteOptions,
    ) -> dict[str, Any]:
        """The patch applied to the current object, written as an update without awaiting
        in between (so it never conflicts with itself)."""
        patch = bodies.decode_patch(rt, content_type, body)
        current = self.to_view(
            rt, self._store.get(self.storage_type(rt), info.namespace or None, info.name)
        )
        patched = bodies.apply_patch(rt, content_type, patch, current)
        return self._write(rt, info, patched, options)

    # -- helpers ---------------------------------------------------------------------

    def _write(
        self, rt: ResourceType, info: RequestInfo, obj: dict[str, Any], options: WriteOptions
    ) -> dict[str, Any]:
        obj = bodies.admit_update(rt, info, obj, options, store=self._store, crds=self._crds)
        if options.dry_run:
            return self.to_view(rt, obj)
        sub = info.subresource or None
        updated = self._store.update(
            self.storage_type(rt),
            self.from_view(rt, obj),
            namespace=info.namespace or None,
            name=info.name,
            subresource=sub,
        )
        if rt == CRDS and sub is None:
            updated = self._crds.establish(updated)
        return self.to_view(rt, updated)


def _node_name(obj: dict[str, Any]) -> str:
    spec = obj.get("spec")
    return str(spec.get("nodeName") or "") if isinstance(spec, dict) else ""
