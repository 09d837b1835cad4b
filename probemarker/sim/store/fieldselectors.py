"""Field selectors as the API server parses and matches them (k8s.io/apimachinery pkg/fields).

``=``, ``==``, ``!=`` terms joined by ``,``, with ``\\`` escapes in values; which field
labels each kind supports (:func:`supported_field_labels`) and their values
(:func:`field_value`) follow the field label conversion functions of pkg/apis/core/v1.
A missing field reads as ``""``, as ``fields.Set.Get`` does. Parsed selectors are
immutable values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from probemarker.sim.errors import BadRequest

__all__ = [
    "FieldSelector",
    "FieldTerm",
    "field_value",
    "parse_field_selector",
    "supported_field_labels",
]

# ---------------------------------------------------------------- field selectors


@dataclass(frozen=True, slots=True)
class FieldTerm:
    field: str
    value: str
    negate: bool = False


@dataclass(frozen=True, slots=True)
class FieldSelector:
    terms: tuple[FieldTerm, ...] = ()

    def matches(self, get_field: Callable[[str], str | None]) -> bool:
        for t in self.terms:
            have = get_field(t.field) or ""
            if (have == t.value) == t.negate:
                return False
        return True

    @property
    def empty(self) -> bool:
        return not self.terms

    def check_supported(self, supported: frozenset[str]) -> None:
        """Refuse field labels the resource does not support, as the field label
        conversion does: BadRequest ``field label not supported: X``."""
        for t in self.terms:
            if t.field not in supported:
                raise BadRequest(f"field label not supported: {t.field}")


def _split_terms(text: str) -> list[str]:
    terms, start, in_slash = [], 0, False
    for i, c in enumerate(text):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _unescape(value: str) -> str:
    out, in_slash = [], False
    for c in value:
        if in_slash:
            if c not in "\\,=":
                raise BadRequest(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c in ",=":
            raise BadRequest(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise BadRequest("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(text: str, *, supported: frozenset[str] | None = None) -> FieldSelector:
    """Parse a ``fieldSelector`` query value (fields.ParseSelector); with ``supported``,
    unknown field labels are refused as the API server refuses them."""
    if not text:
        return FieldSelector()
    terms: list[FieldTerm] = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        for i in range(len(part)):
            rest = part[i:]
            op = next((o for o in ("!=", "==", "=") if rest.startswith(o)), None)
            if op is not None:
                lhs, rhs = part[:i], part[i + len(op) :]
                terms.append(FieldTerm(lhs, _unescape(rhs), negate=op == "!="))
                break
        else:
            raise BadRequest(f"invalid selector: '{text}'; can't understand '{part}'")
    selector = FieldSelector(tuple(terms))
    if supported is not None:
        selector.check_supported(supported)
    return selector


# ---------------------------------------------------------------- selectable fields per kind

_META = ("metadata.name", "metadata.namespace")
_POD_FIELDS = {
    "spec.nodeName": ("spec", "nodeName"),
    "spec.restartPolicy": ("spec", "restartPolicy"),
    "spec.schedulerName": ("spec", "schedulerName"),
    "spec.serviceAccountName": ("spec", "serviceAccountName"),
    "status.phase": ("status", "phase"),
    "status.nominatedNodeName": ("status", "nominatedNodeName"),
}
_EVENT_FIELDS = {
    **{f"involvedObject.{k}": ("involvedObject", k)
       for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
    "reason": ("reason",),
    "reportingComponent": ("reportingComponent",),
    "source": ("source", "component"),
    "type": ("type",),
}  # fmt: skip


def supported_field_labels(kind: str, group: str = "") -> frozenset[str]:
    """The field labels the API server accepts in a fieldSelector for this kind."""
    if group == "" and kind == "Pod":
        extra: tuple[str, ...] = (*_POD_FIELDS, "spec.hostNetwork", "status.podIP")
    elif kind == "Event" and group in ("", "events.k8s.io"):
        extra = tuple(_EVENT_FIELDS)
    elif group == "" and kind == "Namespace":
        extra = ("status.phase",)
    elif group == "" and kind == "Node":
        extra = ("spec.unschedulable",)
    else:
        extra = ()
    return frozenset((*_META, *extra))


def _dig(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    cur: Any = obj
    for p in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(p)
    return cur


def _as_field_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def field_value(obj: Mapping[str, Any], field: str) -> str | None:
    """The value of a selectable field of a stored object (core/v1 form for events), or
    None when the object's kind does not support that field label."""
    kind = obj.get("kind", "")
    if field == "metadata.name":
        return _as_field_string(_dig(obj, ("metadata", "name")))
    if field == "metadata.namespace":
        return _as_field_string(_dig(obj, ("metadata", "namespace")))
    if kind == "Pod":
        if field in _POD_FIELDS:
            return _as_field_string(_dig(obj, _POD_FIELDS[field]))
        if field == "spec.hostNetwork":
            return _as_field_string(bool(_dig(obj, ("spec", "hostNetwork"))))
        if field == "status.podIP":
            ips = _dig(obj, ("status", "podIPs"))
            if isinstance(ips, list) and ips and isinstance(ips[0], Mapping):
                return _as_field_string(ips[0].get("ip"))
            return _as_field_string(_dig(obj, ("status", "podIP")))
    elif kind == "Event" and field in _EVENT_FIELDS:
        return _as_field_string(_dig(obj, _EVENT_FIELDS[field]))
    elif kind == "Namespace" and field == "status.phase":
        return _as_field_string(_dig(obj, ("status", "phase")))
    elif kind == "Node" and field == "spec.unschedulable":
        return _as_field_string(bool(_dig(obj, ("spec", "unschedulable"))))
    return None
