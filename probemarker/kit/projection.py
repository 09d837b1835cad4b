"""Projections: the few fields of an object a caller keeps, built from a field spec.

Stage: between the watch parser (kube/watch/watchevents.py) and the informer's store
(kube/watch/cache.py). Input: a whole object as parsed JSON, and a `FieldSpec` compiled
once from dotted paths. Output: a new dict holding only the selected fields.

Paths: `metadata.labels` keeps the whole value at that path; `spec.containers[].name`
walks into every element of the list `spec.containers` and keeps its `name`.
A path that covers another (`metadata` and `metadata.labels`) keeps the wider one.
A field missing from the object is left out, never filled with None; an object
walked into that holds none of the selected fields is left out too (a pod without
`status` and one whose `status` has only unselected fields project the same).

A projection may put a value of its own at a path: the pod projection
(watch/pods.py `pod_projector`) puts a `watch.annotations.AnnotationSummary` at
`metadata.annotations` instead of the map.

Invariants:
- pure: no I/O, the input is not changed; kept values are shared with the input
  (not copied), so both are read-only by convention;
- identity is always kept: `metadata.name`, `metadata.namespace` and
  `metadata.uid` are added to every spec, so a projection names its object;
- `metadata.resourceVersion` is *not* added: the store keeps it beside the
  projection, and leaving it out is what lets the informer tell a write that
  changed nothing the caller reads (no change emitted) from one that did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "IDENTITY_FIELDS",
    "FieldSpec",
    "KeepAnnotations",
    "Projector",
    "compile_fields",
    "project",
    "projector",
]

Projector = Callable[[Mapping[str, Any]], dict[str, Any]]
# The annotation keys whose values a projection keeps, given the object's metadata.
KeepAnnotations = Callable[[Mapping[str, Any]], Iterable[str]]

_MISSING: Any = object()

IDENTITY_FIELDS = ("metadata.name", "metadata.namespace", "metadata.uid")


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    each: bool  # the value is a list: project every element with `sub`
    sub: FieldSpec | None  # None: keep the whole value


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """A compiled set of paths (see the module docstring); build with `compile_fields`."""

    fields: tuple[_Field, ...]


def _parse(path: str) -> list[tuple[str, bool]]:
    if not path or path.startswith(".") or path.endswith(".") or ".." in path:
        raise ValueError(f"invalid field path {path!r}")
    steps: list[tuple[str, bool]] = []
    for part in path.split("."):
        each = part.endswith("[]")
        name = part.removesuffix("[]")
        if not name or "[" in name or "]" in name:
            raise ValueError(f"invalid field path {path!r}")
        steps.append((name, each))
    if steps[-1][1]:
        raise ValueError(f"{path!r}: a path ends at a field, not at `[]` (keep the list whole)")
    return steps


# A tree under construction: name -> (each, children; None = keep whole).
_Tree = dict[str, tuple[bool, "dict[str, Any] | None"]]


def _insert(tree: _Tree, steps: list[tuple[str, bool]], path: str) -> None:
    name, each = steps[0]
    known = tree.get(name)
    if known is not None and known[1] is not None and known[0] != each:
        raise ValueError(f"{path!r}: {name!r} is used both as a list (`[]`) and as an object")
    if len(steps) == 1:
        tree[name] = (False, None)  # the whole value wins over any narrower path
        return
    if known is not None and known[1] is None:
        return  # already kept whole
    children: _Tree = known[1] if known is not None and known[1] is not None else {}
    tree[name] = (each, children)
    _insert(children, steps[1:], path)


def _freeze(tree: _Tree) -> FieldSpec:
    return FieldSpec(
        tuple(
            _Field(name, each, None if sub is None else _freeze(sub))
            for name, (each, sub) in sorted(tree.items())
        )
    )


def compile_fields(paths: Iterable[str]) -> FieldSpec:
    """Compile dotted paths (plus the identity fields) into a `FieldSpec`."""
    tree: _Tree = {}
    for path in (*IDENTITY_FIELDS, *paths):
        _insert(tree, _parse(path), path)
    return _freeze(tree)


def project(obj: Mapping[str, Any], spec: FieldSpec) -> dict[str, Any]:
    """The fields of `obj` that `spec` selects (missing ones left out)."""
    out: dict[str, Any] = {}
    get = obj.get
    for field in spec.fields:
        value = get(field.name, _MISSING)
        if value is _MISSING:
            continue
        sub = field.sub
        if sub is None:
            out[field.name] = value
        elif field.each:
            # JSON objects are dicts (orjson); `dict` checks are much cheaper than `Mapping`'s.
            if type(value) is list:
                out[field.name] = [
                    project(item, sub) if type(item) is dict else item for item in value
                ]
        elif type(value) is dict:
            inner = project(value, sub)
            if inner:  # nothing selected inside: as if the object were absent
                out[field.name] = inner
    return out


def projector(paths: Iterable[str]) -> Projector:
    """A projection function for `paths`, compiled once."""
    spec = compile_fields(paths)

    def apply(obj: Mapping[str, Any]) -> dict[str, Any]:
        return project(obj, spec)

    return apply
