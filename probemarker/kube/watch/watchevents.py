"""One watch line -> one typed watch event.

Stage: the first step of the informer's watch loop, right after the client's
`stream_lines`. Input: one line of a watch answer (kube-apiserver sends one JSON
document `{"type": ..., "object": ...}` per line, apimachinery's
`metav1.WatchEvent`). Output: an `ObjectEvent` (ADDED, MODIFIED, DELETED), a
`BookmarkEvent` (only the resourceVersion matters: the server's progress mark),
or an `ErrorEvent` whose `error` is the error tree's exception for the Status the
server sent (410 Expired when the watch's resourceVersion is too old, as the
watch cache does on `too old resource version`).

Invariants: pure; the line is parsed once with orjson; anything that is not a
well-formed event is `ApiMalformed` (the informer restarts the watch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from probemarker.kube.connect.errors import (
    ApiError,
    ApiMalformed,
    RequestInfo,
    error_from_response,
    loads_object,
)

__all__ = [
    "BookmarkEvent",
    "ErrorEvent",
    "ObjectEvent",
    "WatchEvent",
    "parse_watch_line",
]

ObjectEventType = Literal["ADDED", "MODIFIED", "DELETED"]
_OBJECT_TYPES: dict[object, ObjectEventType] = {
    "ADDED": "ADDED",
    "MODIFIED": "MODIFIED",
    "DELETED": "DELETED",
}

# apimachinery's apierrors.FromObject: a Status without a code is an internal error,
# except the old reasons of an expired watch (servers before 1.18 sent "Gone").
_CODE_OF_REASON = {"Expired": 410, "Gone": 410}


@dataclass(frozen=True, slots=True)
class ObjectEvent:
    type: ObjectEventType
    object: dict[str, Any]


@dataclass(frozen=True, slots=True)
class BookmarkEvent:
    resource_version: str


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    error: ApiError


WatchEvent = ObjectEvent | BookmarkEvent | ErrorEvent


def _error_of(status: dict[str, Any], request: RequestInfo | None) -> ApiError:
    code = status.get("code")
    if not isinstance(code, int) or code < 400:
        code = _CODE_OF_REASON.get(str(status.get("reason", "")), 500)
    return error_from_response(code, orjson.dumps(status), {}, request)


def parse_watch_line(line: bytes, *, request: RequestInfo | None = None) -> WatchEvent:
    """Parse one watch line; `ApiMalformed` if it is not a watch event."""
    doc = loads_object(line, what="a watch line", request=request)
    kind = doc.get("type")
    obj = doc.get("object")
    if not isinstance(obj, dict):
        raise ApiMalformed(f"a {kind} watch event has no object", request=request)
    object_type = _OBJECT_TYPES.get(kind)
    if object_type is not None:
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise ApiMalformed(f"a {kind} watch event's object has no name", request=request)
        return ObjectEvent(object_type, obj)
    if kind == "BOOKMARK":
        meta = obj.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if not isinstance(rv, str) or not rv:
            raise ApiMalformed("a BOOKMARK has no resourceVersion", request=request)
        return BookmarkEvent(rv)
    if kind == "ERROR":
        return ErrorEvent(_error_of(obj, request))
    raise ApiMalformed(f"unknown watch event type {kind!r}", request=request)
