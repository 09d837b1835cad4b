"""Type assignability and type-parameter unification, as cel-go's checker does it
(checker/types.go and checker/mapping.go).

Stage: used by the checker during overload resolution. Inputs: types and a `Mapping` of type
parameter substitutions. Outputs: a new mapping when a type is assignable (the input mapping is
never changed), the substituted form of a type, the most general of two types.

Invariant: only type parameters are ever keys of a mapping.
"""

from __future__ import annotations

from probemarker.sim.crd.schema.cel.celcheck.types import (
    DYN,
    NULL,
    CelType,
    Kind,
    is_dyn,
    is_dyn_or_error,
    list_of,
    map_of,
    type_of,
)

Mapping = dict[CelType, CelType]

_SIMPLE = frozenset(
    {Kind.BOOL, Kind.BYTES, Kind.DOUBLE, Kind.INT, Kind.STRING, Kind.UINT, Kind.ANY,
     Kind.DURATION, Kind.TIMESTAMP, Kind.STRUCT}
)  # fmt: skip
_PARAMETERISED = frozenset({Kind.OPAQUE, Kind.LIST, Kind.MAP})


def _accepts(target: CelType, source: CelType) -> bool:
    """types.Type.IsAssignableType with its default rule (no wrapper types here)."""
    if target == source or target.kind in (Kind.DYN, Kind.ANY, Kind.TYPE_PARAM):
        return True
    if (
        target.kind is not source.kind
        or target.name != source.name
        or len(target.params) != len(source.params)
    ):
        return False
    return all(_accepts(t, s) for t, s in zip(target.params, source.params, strict=True))


def _nullable(t: CelType) -> bool:
    if t.kind in (Kind.OPAQUE, Kind.STRUCT, Kind.ANY, Kind.DURATION, Kind.TIMESTAMP):
        return True
    return _accepts(t, NULL)


def _assignable(m: Mapping, t1: CelType, t2: CelType) -> bool:
    if t2.kind is Kind.TYPE_PARAM:
        valid, has_sub = _valid_substitution(m, t1, t2)
        if valid:
            return True
        if has_sub:
            return False
    if t1.kind is Kind.TYPE_PARAM:
        return _valid_substitution(m, t2, t1)[0]
    if is_dyn_or_error(t1) or is_dyn_or_error(t2):
        return True
    if t1.kind is Kind.NULL:
        return _nullable(t2)
    if t2.kind is Kind.NULL:
        return _nullable(t1)
    if t1.kind in _SIMPLE:
        return _accepts(t2, t1)
    if t1.kind is Kind.TYPE:
        return t2.kind is Kind.TYPE
    if t1.kind in _PARAMETERISED:
        return (
            t1.kind is t2.kind and t1.name == t2.name and _assignable_list(m, t1.params, t2.params)
        )
    return False


def _valid_substitution(m: Mapping, t1: CelType, t2: CelType) -> tuple[bool, bool]:
    """Whether t2 (a type parameter, or its substitution) may stand for t1; and whether t2
    already had a substitution."""
    if t1 == t2:
        return True, True
    sub = m.get(t2)
    if sub is not None:
        if t1 == sub:
            return True, True
        if _assignable(m, t1, sub):
            general = most_general(t1, sub)
            if _not_referenced_in(m, t2, general):
                m[t2] = general
            return True, True
        return False, True
    if _not_referenced_in(m, t2, t1):
        m[t2] = t1
        return True, False
    return False, False


def _assignable_list(m: Mapping, l1: tuple[CelType, ...], l2: tuple[CelType, ...]) -> bool:
    if len(l1) != len(l2):
        return False
    return all(_assignable(m, a, b) for a, b in zip(l1, l2, strict=True))


def is_assignable(m: Mapping, t1: CelType, t2: CelType) -> Mapping | None:
    """A copy of `m` extended so that t1 is assignable to t2, or None."""
    copy = dict(m)
    return copy if _assignable(copy, t1, t2) else None


def is_assignable_list(
    m: Mapping, l1: tuple[CelType, ...], l2: tuple[CelType, ...]
) -> Mapping | None:
    copy = dict(m)
    return copy if _assignable_list(copy, l1, l2) else None


def _less_specific(t1: CelType, t2: CelType) -> bool:
    """isEqualOrLessSpecific."""
    if is_dyn(t1) or t1.kind is Kind.TYPE_PARAM:
        return True
    if is_dyn(t2) or t2.kind is Kind.TYPE_PARAM or t1.kind is not t2.kind:
        return False
    if t1.kind is Kind.OPAQUE:
        return (
            t1.name == t2.name
            and len(t1.params) == len(t2.params)
            and all(_less_specific(a, b) for a, b in zip(t1.params, t2.params, strict=True))
        )
    if t1.kind in (Kind.LIST, Kind.MAP):
        return all(_less_specific(a, b) for a, b in zip(t1.params, t2.params, strict=True))
    if t1.kind is Kind.TYPE:
        return True
    return t1 == t2


def most_general(t1: CelType, t2: CelType) -> CelType:
    return t1 if _less_specific(t1, t2) else t2


def _not_referenced_in(m: Mapping, t: CelType, within: CelType) -> bool:
    """The occurs check."""
    if t == within:
        return False
    if within.kind is Kind.TYPE_PARAM:
        sub = m.get(within)
        return True if sub is None else _not_referenced_in(m, t, sub)
    if within.kind in (Kind.OPAQUE, Kind.LIST, Kind.MAP, Kind.TYPE):
        return all(_not_referenced_in(m, t, p) for p in within.params)
    return True


def substitute(m: Mapping, t: CelType, params_to_dyn: bool) -> CelType:
    """Replace bound type parameters (and, if asked, unbound ones by dyn)."""
    sub = m.get(t)
    if sub is not None:
        return substitute(m, sub, params_to_dyn)
    if t.kind is Kind.TYPE_PARAM:
        return DYN if params_to_dyn else t
    if not t.params:
        return t
    if t.kind is Kind.LIST:
        return list_of(substitute(m, t.params[0], params_to_dyn))
    if t.kind is Kind.MAP:
        return map_of(
            substitute(m, t.params[0], params_to_dyn), substitute(m, t.params[1], params_to_dyn)
        )
    if t.kind is Kind.TYPE:
        return type_of(substitute(m, t.params[0], params_to_dyn))
    return CelType(t.kind, t.name, tuple(substitute(m, p, params_to_dyn) for p in t.params))
