"""LIST and WATCH filtering and pagination, as the apiserver storage layer does them.

:func:`make_matcher` builds the predicate for a namespace + label selector + field
selector (refusing field labels the kind does not support, with the API server's 400).
:func:`list_page` reads one LIST page in key order; ``remainingItemCount`` only for
unfiltered lists, as the API server does.

A continue token is base64url JSON ``{"v":"meta.k8s.io/v1","rv":<list rv>,"start":<key>\\0}``
(the shape of k8s.io/apiserver storage.EncodeContinue); the next page starts after that
key and reads the state at the token's resourceVersion (:func:`state_at_version`,
rebuilt from the kept history by undoing later writes), so pages are consistent. A
token whose resourceVersion has left the kept history is refused with 410 Expired, the
API server's message and, in the Status's ``metadata.continue``, a token with
resourceVersion -1 that continues at the latest state (handleCompactedErrorForPaging).
A version older than the history is 410 Expired, newer than the store 504 (Too large).
Pure functions: they read the store's state, never change it.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from probemarker.sim.errors import BadRequest, Expired, TooLargeResourceVersion
from probemarker.sim.store.resourcetype import ResourceType, bucket_of, key_of, present
from probemarker.sim.store.selectors import (
    FieldSelector,
    LabelSelector,
    field_value,
    parse_field_selector,
    parse_label_selector,
    supported_field_labels,
)
from probemarker.sim.store.watchcache import History, HistoryEntry

__all__ = [
    "ListResult",
    "Matcher",
    "decode_continue",
    "encode_continue",
    "first_at",
    "key_range",
    "keys_in",
    "list_page",
    "make_matcher",
    "state_at",
    "state_at_version",
]

Matcher = Callable[[Mapping[str, Any]], bool]


@dataclass(frozen=True, slots=True)
class ListResult:
    """One LIST page. ``items`` are shared, read-only store objects."""

    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str | None = None
    remaining: int | None = None


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


def keys_in(sorted_keys: list[str], rt: ResourceType, namespace: str | None) -> list[str]:
    """Of a bucket's sorted keys, those in ``namespace`` (all for None or a cluster-scoped
    ``rt``)."""
    return key_range(sorted_keys, namespace + "/") if namespace and rt.namespaced else sorted_keys


def state_at_version(
    rt: ResourceType,
    namespace: str | None,
    rv: int,
    *,
    current: Mapping[str, dict[str, Any]],
    store_rv: int,
    history: History,
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """``rt``'s bucket (``current`` now, at ``store_rv``) as it was at ``rv``, and its
    sorted keys in ``namespace``: 504 when ``rv`` is newer than the store, 410 when older
    than the kept history."""
    if rv > store_rv:
        raise TooLargeResourceVersion(rv, store_rv, retry_after=0)
    if rv < history.floor:
        raise Expired("The resourceVersion for the provided list is too old.")
    bucket = bucket_of(rt)
    later = (e for e in history.since(rv) if e.bucket == bucket)
    state = state_at(current, later, lambda o: key_of(rt, o))
    return state, keys_in(sorted(state), rt, namespace)


def _selector_empty(selector: str | LabelSelector | FieldSelector | None) -> bool:
    if selector is None or isinstance(selector, str):
        return not selector
    return selector.empty


def list_page(
    rt: ResourceType,
    *,
    current: Mapping[str, dict[str, Any]],
    keys: list[str],
    store_rv: int,
    history: History,
    namespace: str | None,
    label_selector: str | LabelSelector | None,
    field_selector: str | FieldSelector | None,
    limit: int | None,
    continue_token: str | None,
    exact_rv: int | None,
) -> ListResult:
    """One LIST page of ``rt``'s bucket (``current`` at ``store_rv``, ``keys`` its sorted
    keys in ``namespace``): at ``exact_rv`` (or the continue token's version) when given,
    else now."""
    matches = make_matcher(rt, namespace, label_selector, field_selector)
    list_rv, start = store_rv, ""
    if continue_token:
        token_rv, start = decode_continue(continue_token, floor=history.floor)
        if token_rv > 0:
            exact_rv = token_rv
    objects = current
    if exact_rv is not None and exact_rv != store_rv:
        objects, keys = state_at_version(
            rt, namespace, exact_rv, current=current, store_rv=store_rv, history=history
        )
        list_rv = exact_rv
    filtered = not (_selector_empty(label_selector) and _selector_empty(field_selector))
    items: list[dict[str, Any]] = []
    token: str | None = None
    remaining: int | None = None
    last_key = ""
    for index in range(first_at(keys, start), len(keys)):
        obj = objects[keys[index]]
        if not matches(obj):
            continue
        if limit is not None and len(items) >= limit:
            token = encode_continue(list_rv, last_key)
            remaining = None if filtered else len(keys) - index
            break
        items.append(present(rt, obj, share=True))
        last_key = keys[index]
    return ListResult(items, str(list_rv), token, remaining)
