"""Handlers of the resource API's reads and writes: get, list, create, update, patch.

Maps a parsed request (`RequestInfo` + body + query) onto the store, the way
kube-apiserver's generic registry handlers do:

* create: 201, body namespace must match the URL's, kind defaults applied
  (`defaults.py`), custom resources admitted through their schema, CRDs
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

Deletion is in deletion.py.

events.k8s.io/v1 requests are served from the core/v1 events the store keeps,
converted at the edge (`events.py`).
"""

from __future__ import annotations

import copy
import secrets
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from probemarker.sim.crd.serving import CrdController
from probemarker.sim.errors import ApiError, Invalid, StatusCause
from probemarker.sim.kubelet.scheduler import Scheduler
from probemarker.sim.server import events as event_conv
from probemarker.sim.server.defaults import admit_namespace, admit_node, admit_pod
from probemarker.sim.server.discovery import (
    CRDS,
    EVENTS,
    EVENTS_V1,
    NAMESPACES,
    NODES,
    PODS,
    Catalog,
)
from probemarker.sim.server.discovery import group_version as gv_of
from probemarker.sim.server.eventcheck import check_event_create, check_event_update
from probemarker.sim.server.requestinfo import RequestInfo
from probemarker.sim.server.status import StatusError, bad_request, unsupported_media_type
from probemarker.sim.store.listopts import list_read
from probemarker.sim.store.objects import ResourceType, Store
from probemarker.sim.store.patch import (
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """Query options of a write: `fieldValidation` (Strict, Warn or Ignore; kube-apiserver's
    default is Warn) and `dryRun=All`.  `warnings` collects the `Warning` headers to send."""

    field_validation: str = "Warn"
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def from_query(cls, query: Mapping[str, str], *, kind: str = "DeleteOptions") -> WriteOptions:
        """Parse and validate (ValidateCreateOptions/UpdateOptions/PatchOptions/DeleteOptions:
        422 on ``<kind>.meta.k8s.io ""``) a write's query. ``kind`` names the options kind."""
        causes: list[StatusCause] = []
        dry_run = query.get("dryRun")
        if dry_run not in (None, "All"):
            causes.append(
                StatusCause(
                    "FieldValueNotSupported",
                    f'Unsupported value: []string{{"{dry_run}"}}: supported values: "All"',
                    "dryRun",
                )
            )
        validation = query.get("fieldValidation") or ""
        if kind != "DeleteOptions":
            causes += _field_manager_causes(query.get("fieldManager") or "")
            if validation not in ("", "Strict", "Warn", "Ignore"):
                causes.append(
                    StatusCause(
                        "FieldValueNotSupported",
                        f'Unsupported value: "{validation}": supported values: "", "Ignore", '
                        '"Strict", "Warn"',
                        "fieldValidation",
                    )
                )
        if causes:
            raise Invalid(kind, "meta.k8s.io", "", causes)
        return cls(field_validation=validation or "Warn", dry_run=dry_run == "All")


_FIELD_MANAGER_MAX = 128
_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def _go_quote(text: str) -> str:
    """``text`` as Go's %q prints it."""
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def _field_manager_causes(manager: str) -> list[StatusCause]:
    """ValidateFieldManager: at most 128 bytes, printable characters only."""
    causes: list[StatusCause] = []
    if len(manager.encode()) > _FIELD_MANAGER_MAX:
        causes.append(
            StatusCause(
                "FieldValueTooLong",
                f"Too long: may not be more than {_FIELD_MANAGER_MAX} bytes",
                "fieldManager",
            )
        )
    for index, ch in enumerate(manager):
        if not ch.isprintable():
            position = len(manager[:index].encode())
            causes.append(
                StatusCause(
                    "FieldValueInvalid",
                    f"Invalid value: {_go_quote(manager)}: invalid character U+{ord(ch):04X} "
                    f"(at position {position})",
                    "fieldManager",
                )
            )
    return causes


def decode_body(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"error decoding request body: {exc}") from None


class Resources:
    """Serves the CRUD verbs for every type in the catalog."""

    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        crds: CrdController,
        clock: Callable[[], datetime],
        scheduler: Scheduler | None = None,
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

    @staticmethod
    def storage_type(rt: ResourceType) -> ResourceType:
        return EVENTS if rt == EVENTS_V1 else rt

    @staticmethod
    def to_view(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        return event_conv.from_core(obj) if rt == EVENTS_V1 else obj

    @staticmethod
    def from_view(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        return event_conv.to_core(obj) if rt == EVENTS_V1 else obj

    # -- verbs -----------------------------------------------------------------------

    def get(self, rt: ResourceType, info: RequestInfo) -> dict[str, Any]:
        obj = self._store.get(self.storage_type(rt), info.namespace or None, info.name)
        return self.to_view(rt, obj)

    def list(self, rt: ResourceType, info: RequestInfo, query: Mapping[str, str]) -> dict[str, Any]:
        """A LIST page as the API server reads it (:func:`list_read`); the caller has
        awaited :meth:`Store.wait_fresh` for a "not older than" version."""
        field_selector = query.get("fieldSelector") or None
        if field_selector and rt == EVENTS_V1:
            field_selector = event_conv.field_selector_to_core(field_selector)
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
        obj = self._check_body(rt, info, body)
        meta = obj.setdefault("metadata", {})
        _bind_namespace(rt, info, meta)
        if not meta.get("name") and not meta.get("generateName"):
            raise StatusError(
                422 if rt.is_custom else 400,
                "Invalid" if rt.is_custom else "BadRequest",
                "name or generateName is required"
                if rt.is_custom
                else "resource name may not be empty",
            )
        obj = self._admit_create(rt, obj, options)
        if options.dry_run:
            return self._dry_run_create(rt, info, obj)
        node = self._scheduler.bind(obj) if rt == PODS and self._scheduler else None
        created = self._store.create(
            self.storage_type(rt), self.from_view(rt, obj), namespace=info.namespace or None
        )
        if node is not None and self._scheduler is not None:
            self._scheduler.record(created, node)
        if rt == CRDS:
            created = self._crds.establish(created)
        return self.to_view(rt, created)

    def _dry_run_create(
        self, rt: ResourceType, info: RequestInfo, obj: dict[str, Any]
    ) -> dict[str, Any]:
        """What create would return, without storing (dryRun=All): identity checks only."""
        meta = obj["metadata"]
        if info.namespace:
            self._store.get(NAMESPACES, None, info.namespace)  # 404 when the namespace is absent
        if meta.get("name"):
            try:
                self._store.get(self.storage_type(rt), info.namespace or None, meta["name"])
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
        meta["creationTimestamp"] = self._clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        if rt.is_custom:
            meta["generation"] = 1
        return obj

    def _admit_create(
        self, rt: ResourceType, obj: dict[str, Any], options: WriteOptions
    ) -> dict[str, Any]:
        if rt == PODS:
            return admit_pod(obj)
        if rt == NAMESPACES:
            return admit_namespace(obj)
        if rt == NODES:
            return admit_node(obj)
        if rt == CRDS:
            self._crds.check_crd(obj)
            return obj
        if rt in (EVENTS, EVENTS_V1):
            check_event_create(self.from_view(rt, obj), strict=rt == EVENTS_V1)
        if rt.is_custom:
            return self._crds.admit(
                rt,
                obj,
                old=None,
                field_validation=options.field_validation,
                warnings=options.warnings,
            )
        return obj

    def update(
        self, rt: ResourceType, info: RequestInfo, body: Any, options: WriteOptions
    ) -> dict[str, Any]:
        obj = self._check_body(rt, info, body)
        meta = obj.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != info.name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({info.name})"
            )
        meta["name"] = info.name
        _bind_namespace(rt, info, meta)
        return self._write(rt, info, obj, options)

    def _write(
        self, rt: ResourceType, info: RequestInfo, obj: dict[str, Any], options: WriteOptions
    ) -> dict[str, Any]:
        srt = self.storage_type(rt)
        sub = info.subresource or None
        if rt.is_custom:
            old = self._store.get(srt, info.namespace or None, info.name)
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
            obj = self._crds.admit(
                rt,
                candidate,
                old=old,
                field_validation=options.field_validation,
                warnings=options.warnings,
            )
        elif rt == CRDS and sub is None:
            self._crds.check_crd(obj)
        elif rt in (EVENTS, EVENTS_V1):
            old = self._store.get(srt, info.namespace or None, info.name)
            check_event_update(self.from_view(rt, obj), old, strict=rt == EVENTS_V1)
        if options.dry_run:
            return self.to_view(rt, obj)
        updated = self._store.update(
            srt,
            self.from_view(rt, obj),
            namespace=info.namespace or None,
            name=info.name,
            subresource=sub,
        )
        if rt == CRDS and sub is None:
            updated = self._crds.establish(updated)
        return self.to_view(rt, updated)

    def patch(
        self,
        rt: ResourceType,
        info: RequestInfo,
        content_type: str,
        body: bytes,
        options: WriteOptions,
    ) -> dict[str, Any]:
        # The sim has no server-side apply: it answers as a server without it does
        # (installer.go lists the patch types it serves), so apply-patch is not offered.
        accepted = [JSON_PATCH, MERGE_PATCH]
        if not rt.is_custom:
            accepted.append(STRATEGIC_PATCH)
        if content_type not in accepted:
            raise unsupported_media_type(content_type, accepted)
        patch = decode_body(body)
        current = self.to_view(
            rt, self._store.get(self.storage_type(rt), info.namespace or None, info.name)
        )
        if content_type == JSON_PATCH:
            if not isinstance(patch, list):
                raise bad_request(
                    "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
                )
            patched = apply_json_patch(current, patch)
        elif content_type == MERGE_PATCH:
            patched = apply_merge_patch(current, patch)
        else:
            patched = apply_strategic_merge_patch(current, patch, kind=rt.kind)
        meta = patched.setdefault("metadata", {})
        if not meta.get("resourceVersion"):
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self._write(rt, info, patched, options)

    # -- helpers ---------------------------------------------------------------------

    def _check_body(self, rt: ResourceType, info: RequestInfo, body: Any) -> dict[str, Any]:
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


def _bind_namespace(rt: ResourceType, info: RequestInfo, meta: dict[str, Any]) -> None:
    """A namespaced object takes the URL's namespace; a different one in the body is refused."""
    if not rt.namespaced:
        return
    if meta.get("namespace") and meta["namespace"] != info.namespace:
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    meta["namespace"] = info.namespace
