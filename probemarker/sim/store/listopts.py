"""ListOptions of a LIST or WATCH: parsing, validation and the read semantics they ask for.

Follows k8s.io/apimachinery/pkg/apis/meta/internalversion/validation (ValidateListOptions,
validateWatchOptions: a refusal is 422 Invalid on ``ListOptions.meta.k8s.io ""``),
k8s.io/apiserver/pkg/storage ValidateListOptions / ListReadConsistency (which read a
LIST gets) and the cacher's watch start (Cacher.Watch, getAllEventsSinceLocked):

LIST (``ListRead``):

* ``continue`` given: the token's resourceVersion exactly (``-1``: the latest, the
  token handed out with a 410 for an expired one); a ``resourceVersion`` other than
  ``""``/``"0"`` beside it is a 400;
* ``resourceVersionMatch=Exact``, or no match with ``limit`` and a resourceVersion other
  than ``"0"`` (the legacy rule): exactly that version (needs kept history, else 410);
* ``NotOlderThan`` or a resourceVersion without limit: at least that version (waits
  for it, see :data:`FRESH_WAIT`); ``"0"``: any, and ``limit`` is ignored (the watch
  cache serves it whole); unset: the latest.

WATCH: ``sendInitialEvents`` needs ``resourceVersionMatch=NotOlderThan`` and the match
needs ``sendInitialEvents``; see :class:`WatchStart` for what each combination starts
with. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from probemarker.sim.errors import BadRequest, Invalid, StatusCause

__all__ = [
    "FRESH_WAIT",
    "ListRead",
    "WatchStart",
    "legacy_watch_start",
    "list_read",
    "parse_rv",
    "watch_start",
]

# watchCache.waitUntilFreshAndBlock's blockTimeout: how long a read for a resourceVersion
# newer than the store's waits before "Too large resource version" (504).
FRESH_WAIT = 3.0

EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"


def _forbidden(field: str, detail: str) -> StatusCause:
    return StatusCause("FieldValueForbidden", f"Forbidden: {detail}", field)


def _not_supported(field: str, value: str, supported: list[str]) -> StatusCause:
    quoted = ", ".join(f'"{v}"' for v in supported)
    return StatusCause(
        "FieldValueNotSupported", f'Unsupported value: "{value}": supported values: {quoted}', field
    )


def _refuse(causes: list[StatusCause]) -> None:
    if causes:
        raise Invalid("ListOptions", "meta.k8s.io", "", causes)


def parse_rv(text: str) -> int:
    """A resourceVersion as APIObjectVersioner.ParseResourceVersion reads it ("" is 0)."""
    if not text:
        return 0
    if not text.isdigit():
        raise BadRequest(f'invalid resource version "{text}"')
    return int(text)


def _bool_param(query: Mapping[str, str], name: str) -> bool | None:
    text = query.get(name)
    if text is None:
        return None
    if text.lower() in ("true", "1"):
        return True
    if text.lower() in ("false", "0", ""):
        return False
    raise BadRequest(f'strconv.ParseBool: parsing "{text}": invalid syntax')


@dataclass(frozen=True, slots=True)
class ListRead:
    """Which state a LIST reads. ``exact``: that version's state (from history);
    ``min_rv``: at least that version (0: any, i.e. the latest here); ``unpaged``: served
    from the watch cache, which ignores ``limit`` (resourceVersion "0" without continue:
    shouldDelegateList keeps it in the cache, and the 1.32 cacher does not paginate);
    ``wait``: a version not reached yet is waited for (the watch cache), else refused at
    once (etcd's validateMinimumResourceVersion, for a paginated NotOlderThan list)."""

    exact: int | None = None
    min_rv: int = 0
    unpaged: bool = False
    wait: bool = True


def list_read(
    query: Mapping[str, str], *, limit: int | None, continue_token: str | None
) -> ListRead:
    """Validate a LIST's options and say what it reads (the token itself is decoded by
    the store; its resourceVersion wins)."""
    rv_text = query.get("resourceVersion") or ""
    match = query.get("resourceVersionMatch") or ""
    causes: list[StatusCause] = []
    if match:
        if not rv_text:
            causes.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )
            )
        if continue_token:
            causes.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
            )
        if match not in (EXACT, NOT_OLDER_THAN):
            causes.append(
                _not_supported("resourceVersionMatch", match, [EXACT, NOT_OLDER_THAN, ""])
            )
        if match == EXACT and rv_text == "0":
            causes.append(
                _forbidden(
                    "resourceVersionMatch",
                    'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    if query.get("sendInitialEvents") is not None:
        causes.append(_forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    _refuse(causes)
    if continue_token:
        if rv_text not in ("", "0"):
            raise BadRequest("specifying resource version is not allowed when using continue")
        return ListRead()
    rv = parse_rv(rv_text)
    if match == EXACT or (not match and limit and rv > 0):
        return ListRead(exact=rv)
    return ListRead(min_rv=rv, unpaged=rv_text == "0", wait=not (limit and rv > 0))


@dataclass(frozen=True, slots=True)
class WatchStart:
    """How a watch starts. ``initial``: send the current state as ADDED first;
    ``initial_end_bookmark``: then a BOOKMARK annotated ``k8s.io/initial-events-end``
    (sendInitialEvents=true and allowWatchBookmarks); ``from_rv``: replay kept events
    after that version (None: start at the current version); ``wait_rv``: the state sent
    must be at least this fresh (sendInitialEvents with a version)."""

    initial: bool
    initial_end_bookmark: bool = False
    from_rv: int | None = None
    wait_rv: int = 0
    allow_bookmarks: bool = False


def watch_start(query: Mapping[str, str]) -> WatchStart:
    """Validate a WATCH's options (422 as validateWatchOptions words it) and say how
    it starts (Cacher.Watch with the WatchList feature on, as in 1.32)."""
    rv_text = query.get("resourceVersion") or ""
    match = query.get("resourceVersionMatch") or ""
    send_initial = _bool_param(query, "sendInitialEvents")
    bookmarks = bool(_bool_param(query, "allowWatchBookmarks"))
    causes: list[StatusCause] = []
    if send_initial is not None and match != NOT_OLDER_THAN:
        causes.append(
            _forbidden(
                "resourceVersionMatch",
                f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}",
            )
        )
    if match:
        if send_initial is None:
            causes.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                    "provided",
                )
            )
        if match != NOT_OLDER_THAN:
            causes.append(_not_supported("resourceVersionMatch", match, [NOT_OLDER_THAN]))
        if query.get("continue"):
            causes.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
            )
    _refuse(causes)
    rv = parse_rv(rv_text)
    if send_initial:
        return WatchStart(
            initial=True, initial_end_bookmark=bookmarks, wait_rv=rv, allow_bookmarks=bookmarks
        )
    if send_initial is False:
        # Start at the given version exactly, or at the current one ("" and "0").
        return WatchStart(initial=False, from_rv=rv or None, allow_bookmarks=bookmarks)
    if rv == 0:
        # Legacy: "" gets the state and starts at the most recent, "0" the same from any.
        return WatchStart(initial=True, allow_bookmarks=bookmarks)
    return WatchStart(initial=False, from_rv=rv, allow_bookmarks=bookmarks)


def legacy_watch_start(
    resource_version: str | None, allow_bookmarks: bool, send_initial_events: bool | None
) -> WatchStart:
    """The start of a watch opened in-process with Store.watch's plain parameters."""
    rv = parse_rv(resource_version or "")
    if send_initial_events:
        return WatchStart(
            initial=True, initial_end_bookmark=allow_bookmarks, allow_bookmarks=allow_bookmarks
        )
    if rv == 0:
        return WatchStart(initial=True, allow_bookmarks=allow_bookmarks)
    return WatchStart(initial=False, from_rv=rv, allow_bookmarks=allow_bookmarks)
