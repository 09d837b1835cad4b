"""Parse a resource request's path and method into a `RequestInfo`.

Follows k8s.io/apiserver/pkg/endpoints/request/requestinfo.go: paths are
`/api/v1/...` (core group) or `/apis/<group>/<version>/...`, optionally
`namespaces/<ns>/` before the resource (but `namespaces/<name>/status` and
`/finalize` are subresources of the namespace itself), then
`<resource>[/<name>[/<subresource>]]` (after `proxy`, the rest is the proxied path).  The deprecated `/watch/` prefix is
understood too.  The verb is derived from the HTTP method as Kubernetes does:
GET is get/list/watch (watch when `watch` is given and not false/0, or the watch prefix),
POST create, PUT update, PATCH patch, DELETE delete/deletecollection.

A path that is not a resource request (discovery, /version, ...) gives None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True, slots=True)
class RequestInfo:
    verb: str
    group: str
    version: str
    namespace: str
    resource: str
    name: str
    subresource: str


def _watch_param(value: str | None) -> bool:
    """requestinfo.go: any ``watch`` value but "false"/"0" (any case) asks for a watch."""
    return value is not None and value.lower() not in ("false", "0")


def parse_request_info(method: str, path: str, query: Mapping[str, str]) -> RequestInfo | None:
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return None
    watch_prefix = False
    if rest[0] == "watch":
        watch_prefix, rest = True, rest[1:]
    namespace = ""
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    # Only a proxy subresource has a path after it (pods/NAME/proxy/PATH...).
    if not rest or (len(rest) > 3 and rest[2] != "proxy"):
        return None
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if resource == "namespaces" and not name:
        namespace = ""
    method = method.upper()
    if method == "GET":
        watching = watch_prefix or _watch_param(query.get("watch"))
        verb = "watch" if watching else ("get" if name else "list")
    elif method == "POST":
        verb = "create"
    elif method == "PUT":
        verb = "update"
    elif method == "PATCH":
        verb = "patch"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = method.lower()
    return RequestInfo(verb, group, version, namespace, resource, name, subresource)
