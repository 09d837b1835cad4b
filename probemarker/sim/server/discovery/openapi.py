"""Serving the discovery paths: legacy discovery and the OpenAPI v3 documents.

`document_for(catalog, path, ...)` answers every non-resource GET the server
serves besides /version and the health checks: `/api`, `/apis`, `/api/v1`,
`/apis/<g>`, `/apis/<g>/<v>` (documents built by catalog.Catalog) and
`/openapi/v3[/...]`.  `/openapi/v2` is answered with 404.

`/openapi/v3` lists one document per served group-version under `paths`
(`api/v1`, `apis/<g>/<v>`), each with a `serverRelativeURL` carrying a `hash`
query.  A group-version's document (`/openapi/v3/apis/<g>/<v>`) has, per kind:

* `paths`: the collection, item and `status` paths with their operations
  (list, create, deletecollection, read, replace, patch, delete), each with
  `x-kubernetes-group-version-kind`, its query parameters and its responses.
  kubectl (1.27+) defaults to `--validate=strict` and looks for a PATCH
  operation of the object's GVK declaring `fieldValidation` (its
  QueryParamVerifierV3); finding it, it sends `?fieldValidation=Strict`
  instead of validating client-side.  PATCH operations of built-in kinds do not
  offer `application/strategic-merge-patch+json`, so `kubectl apply` computes
  strategic merge patches from its compiled-in types rather than from the
  sim's abridged schemas (custom resources get JSON merge patches either way).
* `components.schemas`: the kind and list kind with
  `x-kubernetes-group-version-kind` (what `kubectl explain` looks up), and the
  meta.k8s.io/v1 schemas they reference (openapi_meta.py).  A custom resource's
  schema is built from its CRD's version schema as apiextensions-apiserver does
  (openapi_crd.py); built-in kinds get a top-level-only schema.

Invariant: a document is built from the current catalog and CRDs on every
request and its `hash` is the SHA-512 of its bytes, so the hash changes whenever
the document does (a CRD created, changed or deleted) and kubectl's cache never
serves a stale document.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from probemarker.sim.server.discovery.catalog import NAMESPACES, Catalog, returns_deleted_object
from probemarker.sim.server.discovery.openapi_crd import crd_schemas, definition_name, list_schema
from probemarker.sim.server.discovery.openapi_meta import (
    DELETE_OPTIONS,
    PATCH,
    STATUS,
    builtin_kind_name,
    builtin_kind_schema,
    meta_schemas,
    ref,
)
from probemarker.sim.store.objects import ResourceType

CrdSource = Callable[[str], Mapping[str, Any] | None]
"""Looks up a stored CRD by name (`<plural>.<group>`); None when there is none."""

_LIST_PARAMS = (
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
)
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_DELETE_PARAMS = ("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy")
_BOOLEAN_PARAMS = frozenset(
    {"allowWatchBookmarks", "orphanDependents", "sendInitialEvents", "watch", "force"}
)
_INTEGER_PARAMS = frozenset({"gracePeriodSeconds", "limit", "timeoutSeconds"})
_MEDIA = ("application/json", "application/yaml")


def document_for(
    catalog: Catalog, path: str, *, server_address: str, crd_of: CrdSource
) -> bytes | None:
    """The serialized document served at `path`, or None (404)."""
    parts = [p for p in path.split("/") if p]
    doc: dict[str, Any] | None = None
    if parts == ["api"]:
        doc = catalog.api_versions(server_address)
    elif parts == ["apis"]:
        doc = catalog.api_group_list()
    elif len(parts) == 2 and parts[0] == "api":
        doc = catalog.api_resource_list("", parts[1])
    elif len(parts) == 2 and parts[0] == "apis":
        doc = catalog.api_group(parts[1])
    elif len(parts) == 3 and parts[0] == "apis":
        doc = catalog.api_resource_list(parts[1], parts[2])
    elif parts == ["openapi", "v3"]:
        doc = root_document(catalog, crd_of=crd_of)
    elif parts[:3] == ["openapi", "v3", "api"] and len(parts) == 4:
        return gv_document(catalog, "", parts[3], crd_of=crd_of)
    elif parts[:3] == ["openapi", "v3", "apis"] and len(parts) == 5:
        return gv_document(catalog, parts[3], parts[4], crd_of=crd_of)
    return orjson.dumps(doc) if doc is not None else None


def api_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def gv_document(catalog: Catalog, group: str, version: str, *, crd_of: CrdSource) -> bytes | None:
    """The serialized OpenAPI v3 document for one group-version, or None."""
    types = catalog.in_group_version(group, version)
    if not types:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = meta_schemas()
    for rt in types:
        kind_name, list_name = _add_kind_schemas(schemas, rt, crd_of)
        paths.update(_resource_paths(rt, kind_name=kind_name, list_name=list_name))
    doc = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.2"},
        "paths": paths,
        "components": {"schemas": dict(sorted(schemas.items()))},
    }
    return orjson.dumps(doc)


def root_document(catalog: Catalog, *, crd_of: CrdSource) -> dict[str, Any]:
    """`/openapi/v3`: where each group-version's document is."""
    gvs = sorted({(rt.group, rt.version) for rt in catalog.types()})
    paths: dict[str, Any] = {}
    for group, version in gvs:
        doc = gv_document(catalog, group, version, crd_of=crd_of)
        assert doc is not None
        digest = hashlib.sha512(doc).hexdigest().upper()
        path = api_path(group, version)
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}


def _add_kind_schemas(
    schemas: dict[str, Any], rt: ResourceType, crd_of: CrdSource
) -> tuple[str, str]:
    """Add `rt`'s kind and list-kind schemas; returns their names."""
    list_kind = f"{rt.kind}List"
    if rt.is_custom:
        crd = crd_of(f"{rt.plural}.{rt.group}")
        if crd is not None:
            list_kind = (crd.get("spec") or {}).get("names", {}).get("listKind") or list_kind
            schemas.update(crd_schemas(crd, rt.version))
        kind_name = definition_name(rt.group, rt.version, rt.kind)
        list_name = definition_name(rt.group, rt.version, list_kind)
    else:
        kind_name = builtin_kind_name(rt)
        list_name = kind_name + "List"
        schemas[kind_name] = builtin_kind_schema(rt)
        schemas[list_name] = list_schema(
            item_name=kind_name,
            group=rt.group,
            version=rt.version,
            kind=rt.kind,
            list_kind=list_kind,
            plural=rt.plural,
        )
    schemas.setdefault(
        kind_name,
        {
            "type": "object",
            "x-kubernetes-group-version-kind": [
                {"group": rt.group, "kind": rt.kind, "version": rt.version}
            ],
        },
    )
    return kind_name, list_name


def _parameter(name: str, where: str = "query") -> dict[str, Any]:
    kind = (
        "boolean" if name in _BOOLEAN_PARAMS else "integer" if name in _INTEGER_PARAMS else "string"
    )
    param: dict[str, Any] = {
        "name": name,
        "in": where,
        "schema": {"type": kind, "uniqueItems": True},
    }
    if where == "path":
        param["required"] = True
    return param


def _op_prefix(group: str, version: str) -> str:
    """The group-version part of kube-apiserver's operation IDs (`CoreV1`, `EventsV1`)."""
    name = group.removesuffix(".k8s.io") if group else "core"
    words = name.replace("-", ".").split(".")
    return "".join(w[:1].upper() + w[1:] for w in words) + version[:1].upper() + version[1:]


def _responses(schema_name: str, *codes: str) -> dict[str, Any]:
    content = {media: {"schema": ref(schema_name)} for media in _MEDIA}
    texts = {"200": "OK", "201": "Created", "202": "Accepted"}
    return {code: {"description": texts[code], "content": content} for code in codes}


def _resource_paths(rt: ResourceType, *, kind_name: str, list_name: str) -> dict[str, Any]:
    prefix = "/" + api_path(rt.group, rt.version)
    scope = "Namespaced" if rt.namespaced else ""
    base = (
        f"{prefix}/namespaces/{{namespace}}/{rt.plural}"
        if rt.namespaced
        else (f"{prefix}/{rt.plural}")
    )
    gvk = {"group": rt.group, "kind": rt.kind, "version": rt.version}
    ops_prefix = _op_prefix(rt.group, rt.version)

    def op(
        verb: str,
        action: str,
        suffix: str,
        params: tuple[str, ...],
        responses: dict[str, Any],
        *,
        name: bool = False,
        all_namespaces: bool = False,
        body: tuple[str, str] | None = None,
    ) -> dict[str, Any]:
        path_params = ["namespace"] if rt.namespaced and not all_namespaces else []
        if name:
            path_params.append("name")
        operation: dict[str, Any] = {
            "operationId": f"{verb}{ops_prefix}{suffix}",
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": dict(gvk),
            "parameters": [
                *(_parameter(p) for p in ("pretty", *params)),
                *(_parameter(p, "path") for p in path_params),
            ],
            "responses": responses,
        }
        if body is not None:
            schema_name, media = body
            types = media.split(",")
            operation["requestBody"] = {
                "content": {t: {"schema": ref(schema_name)} for t in types},
                "required": action not in ("delete", "deletecollection"),  # DeleteOptions
            }
        return operation

    deleted = kind_name if returns_deleted_object(rt) else STATUS
    item_ops: dict[str, Any] = {
        "get": op("read", "get", f"{scope}{rt.kind}", (), _responses(kind_name, "200"), name=True),
        "put": op(
            "replace",
            "put",
            f"{scope}{rt.kind}",
            _WRITE_PARAMS,
            _responses(kind_name, "200", "201"),
            name=True,
            body=(kind_name, "application/json,application/yaml"),
        ),
        "patch": op(
            "patch",
            "patch",
            f"{scope}{rt.kind}",
            (*_WRITE_PARAMS, "force"),
            _responses(kind_name, "200", "201"),
            name=True,
            body=(PATCH, "application/json-patch+json,application/merge-patch+json"),
        ),
        "delete": op(
            "delete",
            "delete",
            f"{scope}{rt.kind}",
            _DELETE_PARAMS,
            _responses(deleted, "200", "202"),
            name=True,
            body=(DELETE_OPTIONS, "application/json"),
        ),
    }
    collection_ops: dict[str, Any] = {
        "get": op("list", "list", f"{scope}{rt.kind}", _LIST_PARAMS, _responses(list_name, "200")),
        "post": op(
            "create",
            "post",
            f"{scope}{rt.kind}",
            _WRITE_PARAMS,
            _responses(kind_name, "200", "201", "202"),
            body=(kind_name, "application/json,application/yaml"),
        ),
    }
    if rt != NAMESPACES:  # namespaces have no deletecollection
        collection_ops["delete"] = op(
            "delete",
            "deletecollection",
            f"Collection{scope}{rt.kind}",
            (*_LIST_PARAMS, *_DELETE_PARAMS),
            _responses(STATUS, "200"),
            body=(DELETE_OPTIONS, "application/json"),
        )
    paths: dict[str, Any] = {base: collection_ops, f"{base}/{{name}}": item_ops}
    if rt.namespaced:
        paths[f"{prefix}/{rt.plural}"] = {
            "get": op(
                "list",
                "list",
                f"{rt.kind}ForAllNamespaces",
                _LIST_PARAMS,
                _responses(list_name, "200"),
                all_namespaces=True,
            ),
        }
    if "status" in rt.subresources:
        paths[f"{base}/{{name}}/status"] = {
            verb: dict(operation, operationId=operation["operationId"] + "Status")
            for verb, operation in item_ops.items()
            if verb != "delete"
        }
    return paths
