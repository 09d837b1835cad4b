"""LIST and WATCH filtering and pagination, as the apiserver storage layer does them.

:func:`make_matcher` builds the predicate for a namespace + label selector + field
selector (refusing field labels the kind does not support, with the API server's 400).

A continue token is base64url JSON ``{"v":"meta.k8s.io/v1","rv":<list rv>,"start":<key>\\0}``
(the shape of k8s.io/apiserver storage.EncodeContinue); the next page starts after that
key and reads the state at the token's resourceVersion (:func:`state_at`), so pages are
consistent. A token whose resourceVersion has left the kept history is refused with
410 Expired, the API server's message and, in the Status's ``metadata.continue``, a
token with resourceVersion -1 that continues at the latest state
(handleCompactedErrorForPaging). Pure functions.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from probemarker.sim.errors import BadRequest, Expired
from probemarker.sim.store.resourcetype import ResourceType
from probemarker.sim.store.selectors import (
    FieldSelector,
    LabelSelector,
    field_value,
    parse_field_selector,
    parse_label_selector,
    supported_field_labels,
)
from probemarker.sim.store.watchcache import HistoryEntry

__all__ = [
    "Matcher",
    "decode_continue",
    "encode_continue",
    "first_at",
    "key_range",
    "make_matcher",
    "state_at",
]

Matcher = Callable[[Mapping[str, Any]], bool]

EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)


def encode_continue(rv: int, last_key: str) -> str:
    data = json.dumps(
        {"v": "meta.k8s.io/v1", "rv": rv, "start": last_key + "\x00"}, separators=(",", ":")
    )
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


def decode_continue(token: str, *, floor: int) -> tuple[int, str]:
    """(list resourceVersion, start key) of a token; BadRequest if malformed, Expired if
    its resourceVersion is older than ``floor``."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        rv, start, version = int(data["rv"]), str(data["start"]), data.get("v")
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise BadRequest("invalid continue token: continue key is not valid") from None
    if version != "meta.k8s.io/v1":
        raise BadRequest(
            "invalid continue token: continue key is not valid: server does not recognize "
            f"this encoded version {version}"
        )
    if rv == 0:
        raise BadRequest(
            "invalid continue token: continue key is not valid: incorrect encoded start "
            "resourceVersion (version meta.k8s.io/v1)"
        )
    if not start:
        raise BadRequest(
            "invalid continue token: continue key is not valid: encoded start key empty "
            "(version meta.k8s.io/v1)"
        )
    if 0 < rv < floor:
        raise Expired(
            EXPIRED_CONTINUE, continue_token=encode_continue(-1, start.removesuffix("\x00"))
        )
    return rv, start


def state_at(
    current: Mapping[str, dict[str, Any]],
    later: Iterable[HistoryEntry],
    key_of: Callable[[dict[str, Any]], str],
) -> dict[str, dict[str, Any]]:
    """A bucket's objects as they were before the writes ``later`` (that bucket's kept
    history entries newer than the wanted version, oldest first): each is undone."""
    state = dict(current)
    for entry in reversed(list(later)):
        key = key_of(entry.obj)
        if entry.prev is None:
            state.pop(key, None)
        else:
            state[key] = entry.prev
    return state


def key_range(keys: list[str], prefix: str) -> list[str]:
    """The sorted ``keys`` that start with ``prefix`` (non-empty)."""
    lo = bisect.bisect_left(keys, prefix)
    hi = bisect.bisect_left(keys, prefix[:-1] + chr(ord(prefix[-1]) + 1))
    return keys[lo:hi]


def first_at(keys: list[str], start: str) -> int:
    """Index of the first of the sorted ``keys`` at or after ``start`` ("" = the first)."""
    return bisect.bisect_left(keys, start) if start else 0


def make_matcher(
    rt: ResourceType,
    namespace: str | None,
    label_selector: str | LabelSelector | None,
    field_selector: str | FieldSelector | None,
) -> Matcher:
    """The predicate an object must pass to be listed or watched."""
    labels = (
        parse_label_selector(label_selector) if isinstance(label_selector, str) else label_selector
    )
    fields = (
        parse_field_selector(field_selector) if isinstance(field_selector, str) else field_selector
    )
    if fields is not None:
        fields.check_supported(supported_field_labels(rt.kind, rt.group))
    ns = namespace if rt.namespaced else None

    def matches(obj: Mapping[str, Any]) -> bool:
        meta = obj["metadata"]
        if ns and meta.get("namespace") != ns:
            return False
        if labels is not None and not labels.matches(meta.get("labels") or {}):
            return False
        return fields is None or fields.matches(lambda f: field_value(obj, f))

    return matches
