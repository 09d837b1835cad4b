"""The three PATCH flavours kube-apiserver accepts, as pure functions on JSON objects.

* :func:`apply_json_patch`: RFC 6902 as evanphx/json-patch (v4, the one kube-apiserver
  uses) applies it: ``add`` needs an existing parent (adding ``/status/conditions/-``
  to a pod without conditions fails), ``replace``/``remove`` need an existing target,
  negative array indices count from the end, and ``test`` compares JSON values exactly
  (a missing member tests equal to ``null``). Any failure is the 422 kube-apiserver
  sends (:class:`~probemarker.sim.errors.PatchFailed`, the json-patch error kept in
  ``detail``); a body that is not a list of operations is a 400.
* :func:`apply_merge_patch`: RFC 7386.
* :func:`apply_strategic_merge_patch`: k8s.io/apimachinery strategicpatch for the kinds
  the sim serves, with the ``patchStrategy``/``patchMergeKey`` tags of core/v1 (see
  :data:`MERGE_KEYS`) and the directives ``$patch`` (merge/replace/delete),
  ``$retainKeys``, ``$setElementOrder/<list>`` and ``$deleteFromPrimitiveList/<list>``.
  Lists without a strategy are replaced, as for any atomic list.

Invariants: inputs are never mutated; results share nothing with inputs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probemarker.sim.errors import ApiError, BadRequest, PatchFailed
from probemarker.sim.jsontype import go_json_type
from probemarker.sim.store.objmeta import copy_json
from probemarker.sim.store.smp import MERGE_KEYS, apply_strategic_merge_patch

__all__ = ["MERGE_KEYS", "apply_json_patch", "apply_merge_patch", "apply_strategic_merge_patch"]

# ------------------------------------------------------------------ JSON patch (RFC 6902)


_INDEX = re.compile(r"[+-]?[0-9]+")


class _Fail(Exception):
    pass


def _decode_pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise _Fail("operation missing path field")
    parts = path.split("/")
    if len(parts) < 2:
        raise _Fail(f'doc is missing path: "{path}"')
    return [p.replace("~1", "/").replace("~0", "~") for p in parts[1:]]


def _index(container: list[Any], key: str, *, allow_end: bool) -> int:
    if not _INDEX.fullmatch(key):  # strconv.Atoi's syntax
        raise _Fail(f"Unable to access invalid index: {key}")
    idx = int(key)
    size = len(container)
    if idx < 0:
        if idx < -size:
            raise _Fail(f"Unable to access invalid index: {idx}")
        idx += size
    if idx > size or (idx == size and not allow_end):
        raise _Fail(f"Unable to access invalid index: {idx}")
    return idx


def _parent(doc: Any, parts: list[str], op: str, path: str) -> Any:
    cur = doc
    for part in parts[:-1]:
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list):
            try:
                cur = cur[_index(cur, part, allow_end=False)]
            except _Fail:
                raise _Fail(
                    f'{op} operation does not apply: doc is missing path: "{path}"'
                ) from None
        else:
            raise _Fail(f'{op} operation does not apply: doc is missing path: "{path}"')
        if not isinstance(cur, dict | list):
            raise _Fail(f'{op} operation does not apply: doc is missing path: "{path}"')
    return cur


def _get(doc: Any, path: Any, op: str) -> tuple[Any, str, bool, Any]:
    """(container, key, exists, value) for ``path``."""
    parts = _decode_pointer(path)
    con = _parent(doc, parts, op, str(path))
    key = parts[-1]
    if isinstance(con, dict):
        return con, key, key in con, con.get(key)
    try:
        idx = _index(con, key, allow_end=False)
    except _Fail:
        return con, key, False, None
    return con, key, True, con[idx]


def _add(doc: Any, path: Any, value: Any) -> None:
    parts = _decode_pointer(path)
    con = _parent(doc, parts, "add", str(path))
    key = parts[-1]
    if isinstance(con, dict):
        con[key] = value
    elif key == "-":
        con.append(value)
    else:
        try:
            con.insert(_index(con, key, allow_end=True), value)
        except _Fail as e:
            raise _Fail(f"error in add for path: '{path}': {e}") from None


def _remove(doc: Any, path: Any, op: str = "remove") -> Any:
    con, key, exists, value = _get(doc, path, op)
    if not exists:
        raise _Fail(
            f"error in {op} for path: '{path}': Unable to remove nonexistent key: {key}: missing value"
        )
    if isinstance(con, dict):
        del con[key]
    else:
        del con[_index(con, key, allow_end=False)]
    return value


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values as json-patch's ``test`` sees it (no bool/int/float mixing)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _apply_op(doc: Any, op: Mapping[str, Any]) -> None:
    kind = op.get("op")
    path = op.get("path")
    if kind == "add":
        _add(doc, path, copy_json(op.get("value")))
    elif kind == "remove":
        _remove(doc, path)
    elif kind == "replace":
        con, key, exists, _ = _get(doc, path, "replace")
        if not exists:
            raise _Fail(
                f"replace operation does not apply: doc is missing key: {path}: missing value"
            )
        if isinstance(con, dict):
            con[key] = copy_json(op.get("value"))
        else:
            con[_index(con, key, allow_end=False)] = copy_json(op.get("value"))
    elif kind in ("move", "copy"):
        _, _, exists, value = _get(doc, op.get("from"), kind)
        if not exists:
            raise _Fail(
                f"{kind} operation does not apply: doc is missing from path: {op.get('from')}: missing value"
            )
        if kind == "move":
            if (
                isinstance(path, str)
                and isinstance(op.get("from"), str)
                and path.startswith(op["from"] + "/")
            ):
                raise _Fail("Unable to move a value into one of its children")
            _remove(doc, op.get("from"), "move")
        _add(doc, path, copy_json(value))
    elif kind == "test":
        _, _, exists, value = _get(doc, path, "test")
        expected = op.get("value")
        if not exists:
            if expected is None:
                return
            raise _Fail(f"testing value {path} failed: test failed")
        if not json_equal(value, expected):
            raise _Fail(f"testing value {path} failed: test failed")
    else:
        raise _Fail(f"Unexpected kind: {kind if isinstance(kind, str) else 'unknown'}")


def apply_json_patch(doc: Mapping[str, Any], ops: Any) -> dict[str, Any]:
    """Apply an RFC 6902 patch; 400 for a malformed body, 422 when an operation fails."""
    if not isinstance(ops, list):
        raise BadRequest(
            f"json: cannot unmarshal {go_json_type(ops)} into Go value of type jsonpatch.Patch"
        )
    for op in ops:
        if not isinstance(op, dict):
            raise BadRequest(
                f"json: cannot unmarshal {go_json_type(op)} into Go value of type jsonpatch.Operation"
            )
    if len(ops) > 10000:
        raise ApiError(
            code=413,
            reason="RequestEntityTooLarge",
            message=f"Request entity too large: The allowed maximum operations in a JSON patch is 10000, got {len(ops)}",
        )
    out = copy_json(dict(doc))
    try:
        for op in ops:
            _apply_op(out, op)
    except _Fail as e:
        raise PatchFailed(str(e)) from None
    if not isinstance(out, dict):
        raise PatchFailed("patched document is not an object")
    return out


# ------------------------------------------------------------------ merge patch (RFC 7386)


def _merge_into(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict):
            cur = target.get(k)
            if not isinstance(cur, dict):
                cur = target[k] = {}
            _merge_into(cur, v)
        else:
            target[k] = copy_json(v)


def apply_merge_patch(doc: Mapping[str, Any], patch: Any) -> dict[str, Any]:
    """Apply an RFC 7386 JSON merge patch; a patch that is not an object is a 400."""
    if not isinstance(patch, dict):
        raise BadRequest("Invalid JSON Patch")
    out: dict[str, Any] = copy_json(dict(doc))
    _merge_into(out, patch)
    return out
