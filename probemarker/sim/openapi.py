"""Serving the discovery paths: legacy discovery and the minimal OpenAPI v3 documents.

`document_for(catalog, path)` answers every non-resource GET the server
serves besides /version and the health checks: `/api`, `/apis`, `/api/v1`,
`/apis/<g>`, `/apis/<g>/<v>` (documents built by discovery.Catalog) and
`/openapi/v3[/...]`.

kubectl (1.27+) defaults to `--validate=strict`: before sending an object it
asks whether the server supports *server-side* field validation, by looking
in `/openapi/v3/<api path>` for a PATCH operation tagged with the object's
`x-kubernetes-group-version-kind` that declares a `fieldValidation` query
parameter (kubectl's QueryParamVerifierV3; when the group-version is absent
it checks the Namespace operation in `api/v1`).  When that is found, kubectl
skips client-side validation (which would need the protobuf OpenAPI v2
document) and sends `?fieldValidation=Strict` instead.

These documents therefore carry exactly that: per served kind, its item path
with a PATCH operation, the GVK extension and the `fieldValidation` and
`dryRun` parameters.  They carry no schemas, so kubectl's apply falls back to
its compiled-in types for strategic merge patches of built-in kinds and to
JSON merge patches for custom resources, as it does with any server whose
OpenAPI lacks a kind.  `/openapi/v2` is answered with 404.

Invariant: the `hash` in each serverRelativeURL changes whenever the set of
kinds in that group-version changes, so kubectl's cache never serves stale
documents after a CRD is added.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from probemarker.sim.discovery import Catalog
from probemarker.sim.store import ResourceType


def document_for(catalog: Catalog, path: str, *, server_address: str) -> bytes | None:
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
        doc = root_document(catalog)
    elif parts[:3] == ["openapi", "v3", "api"] and len(parts) == 4:
        return gv_document(catalog, "", parts[3])
    elif parts[:3] == ["openapi", "v3", "apis"] and len(parts) == 5:
        return gv_document(catalog, parts[3], parts[4])
    return orjson.dumps(doc) if doc is not None else None


def api_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _gv_doc(types: list[ResourceType], group: str, version: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for rt in types:
        base = "/" + api_path(group, version)
        if rt.namespaced:
            base += "/namespaces/{namespace}"
        item = f"{base}/{rt.plural}/{{name}}"
        paths[item] = {
            "patch": {
                "operationId": f"patch{rt.kind}",
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {
                    "group": rt.group,
                    "version": rt.version,
                    "kind": rt.kind,
                },
                "parameters": [
                    {
                        "name": "dryRun",
                        "in": "query",
                        "schema": {"type": "string", "uniqueItems": True},
                    },
                    {
                        "name": "fieldManager",
                        "in": "query",
                        "schema": {"type": "string", "uniqueItems": True},
                    },
                    {
                        "name": "fieldValidation",
                        "in": "query",
                        "schema": {"type": "string", "uniqueItems": True},
                    },
                ],
                "responses": {"200": {"description": "OK"}},
            }
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }


def gv_document(catalog: Catalog, group: str, version: str) -> bytes | None:
    """The serialized OpenAPI v3 document for one group-version, or None."""
    types = catalog.in_group_version(group, version)
    if not types:
        return None
    return orjson.dumps(_gv_doc(types, group, version))


def root_document(catalog: Catalog) -> dict[str, Any]:
    """`/openapi/v3`: where each group-version's document is."""
    gvs = sorted({(rt.group, rt.version) for rt in catalog.types()})
    paths: dict[str, Any] = {}
    for group, version in gvs:
        doc = gv_document(catalog, group, version)
        assert doc is not None
        digest = hashlib.sha512(doc).hexdigest()[:128].upper()
        path = api_path(group, version)
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}
