"""The CEL part of CRD admission: what kube-apiserver reports about a schema's
x-kubernetes-validations rules when a CustomResourceDefinition is created (apiextensions
validation's `CELErrors` and the schema-wide cost check), once the schema has no other error.

Input: the parsed openAPIV3Schema, the field path it is reported under and a Kubernetes
profile (1.32 by default). Output: field errors in the API server's order and wording:

- walking the schema as apiextensions does (a node's additionalProperties, then its properties
  in declaration order, then its items, then its own rules), per rule:
  the per-rule cost (estimated cost x the node's cardinality: the product of maxItems /
  maxProperties above it, or what fits in a request) against 10,000,000
  (`Forbidden: estimated rule cost exceeds budget by factor of 13.1x (...)`), a compile error
  (`Invalid value: apiextensions.ValidationRule{...}: compilation failed: ERROR: ...`), the
  messageExpression's compile error or cost (not multiplied), oldSelf on a part of the schema
  that does not correlate with the old object, optionalOldSelf without oldSelf;
- then, when all costs together exceed 100,000,000, `contributed to ...` on the (at most four)
  costliest rules of at least 1,000,000 and the total on `path`.

`estimate_rule_costs` lists every rule and messageExpression with its cost and limit.
Results are cached per schema text, as tests create the same CRD again and again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from probemarker.sim.crd.gotext.fielderr import FieldError, go_quote
from probemarker.sim.crd.schema.cel.celcheck import decltypes
from probemarker.sim.crd.schema.cel.celcheck.compile import Compiled, compile_expression
from probemarker.sim.crd.schema.cel.celcheck.env import K8S_1_32, Env, Profile, rule_env
from probemarker.sim.crd.schema.cel.celcheck.estimate import MAX_U64, sat_mul
from probemarker.sim.crd.schema.node import Rule, SchemaNode

__all__ = [
    "STATIC_ESTIMATED_COST_LIMIT",
    "STATIC_ESTIMATED_CRD_COST_LIMIT",
    "CostReport",
    "RuleCost",
    "estimate_rule_costs",
    "validate_schema_rules",
]

STATIC_ESTIMATED_COST_LIMIT = 10_000_000
STATIC_ESTIMATED_CRD_COST_LIMIT = 100_000_000
_TRY = (
    "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, "
    "maps, and strings are declared)"
)
_POINTER = "0xc000000000"  # Go prints the address of a set *string; any address will do


@dataclass(frozen=True, slots=True)
class RuleCost:
    """One costed expression: `path` ends in `.rule` or `.messageExpression`."""

    path: str
    cost: int
    limit: int


@dataclass(frozen=True, slots=True)
class CostReport:
    rules: tuple[RuleCost, ...]
    total: int
    total_limit: int = STATIC_ESTIMATED_CRD_COST_LIMIT


def cost_error_message(name: str, cost: int, limit: int) -> str:
    """getCostErrorMessage."""
    factor = cost / limit
    if factor > 100.0:
        shown = "more than 100x"
    elif factor < 1.5:
        shown = f"{factor:f}x"
    else:
        shown = f"{factor:.1f}x"
    return f"{name} exceeds budget by factor of {shown} {_TRY}"


def _go_rule(rule: Rule, optional_old_self: object, profile: Profile) -> str:
    """%#v of an apiextensions.ValidationRule (the value of a compile error)."""
    reason = (
        f"(*apiextensions.FieldValueErrorReason)({_POINTER})"
        if rule.reason
        else "(*apiextensions.FieldValueErrorReason)(nil)"
    )
    text = (
        f"apiextensions.ValidationRule{{Rule:{go_quote(rule.rule)}, "
        f"Message:{go_quote(rule.message)}, MessageExpression:{go_quote(rule.message_expression)}, "
        f"Reason:{reason}, FieldPath:{go_quote(rule.field_path)}"
    )
    if profile.optional_old_self:
        pointer = "nil" if optional_old_self is None else _POINTER
        text += f", OptionalOldSelf:(*bool)({pointer})"
    return text + "}"


def _invalid_rule(path: str, rendered: str, detail: str) -> FieldError:
    message = f"{path}: Invalid value: {rendered}: {detail}"
    return FieldError(
        path=path, type="FieldValueInvalid", message=message, value=rendered, detail=detail
    )


@dataclass(slots=True)
class _Walk:
    profile: Profile
    errors: list[FieldError] = field(default_factory=list)
    costs: list[RuleCost] = field(default_factory=list)
    total: int = 0
    expensive: list[tuple[str, int]] = field(default_factory=list)

    def observe(self, path: str, cost: int, limit: int) -> None:
        self.costs.append(RuleCost(path, cost, limit))
        self.total = MAX_U64 if MAX_U64 - self.total < cost else self.total + cost
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT // 100:
            return
        self.expensive.append((path, cost))
        self.expensive.sort(key=lambda item: -item[1])
        del self.expensive[4:]

    def node(
        self, node: SchemaNode, path: str, *, card: int | None, frozen: str | None, root: bool
    ) -> None:
        """Visit `node` (its children first); `card` None is unbounded, `frozen` the path
        above which old and new values stop correlating."""
        child_card = _child_cardinality(node, card)
        if isinstance(node.additional_properties, SchemaNode):
            self.node(node.additional_properties, f"{path}.additionalProperties",
                      card=child_card, frozen=frozen, root=False)  # fmt: skip
        # Object properties always correlate: MapIsCorrelatable is true for granular and
        # atomic maps alike (1.28 and 1.32).
        for key, prop in node.properties.items():
            self.node(prop, f"{path}.properties[{key}]", card=child_card, frozen=frozen,
                      root=False)  # fmt: skip
        if node.items is not None:
            item_frozen = frozen if frozen is not None or node.list_type == "map" else path
            self.node(node.items, f"{path}.items", card=child_card, frozen=item_frozen, root=False)
        if node.rules:
            self.rules(node, path, card=card, frozen=frozen, root=root)

    def rules(
        self, node: SchemaNode, path: str, *, card: int | None, frozen: str | None, root: bool
    ) -> None:
        decl = decltypes.schema_decl_type(
            node, root or node.embedded_resource, enum_sizes=self.profile.enum_string_sizes
        )
        if decl is None:
            detail = (
                "internal error: failed to construct type information for x-kubernetes-validations"
                " rules: unable to convert structural schema to CEL declarations"
            )
            self.errors.append(
                FieldError.make(f"{path}.x-kubernetes-validations", "InternalError", "", detail)
            )
            return
        raw_rules = node.raw.get("x-kubernetes-validations") or []
        envs: dict[bool, Env] = {}
        for index, rule in enumerate(node.rules):
            raw = raw_rules[index] if index < len(raw_rules) else None
            optional = None
            if self.profile.optional_old_self and isinstance(raw, Mapping):
                optional = raw.get("optionalOldSelf")
            wanted = optional is True
            if wanted not in envs:
                envs[wanted] = rule_env(self.profile, decl, optional_old_self=wanted)
            self.rule(rule, optional, envs[wanted], decl,
                      f"{path}.x-kubernetes-validations[{index}]", card=card, frozen=frozen)  # fmt: skip

    def rule(
        self, rule: Rule, optional: object, env: Env, decl: decltypes.DeclType, at: str,
        *, card: int | None, frozen: str | None,
    ) -> None:  # fmt: skip
        compiled = Compiled()
        if rule.rule.strip():
            compiled = compile_expression(rule.rule, env, decl)
        times = card if card is not None else decltypes.max_cardinality(decl.min_size)
        cost = 0 if compiled.max_cost == 0 else sat_mul(compiled.max_cost, times)
        if cost > STATIC_ESTIMATED_COST_LIMIT:
            message = cost_error_message("estimated rule cost", cost, STATIC_ESTIMATED_COST_LIMIT)
            self.errors.append(FieldError.forbidden(f"{at}.rule", message))
        self.observe(f"{at}.rule", cost, STATIC_ESTIMATED_COST_LIMIT)
        if compiled.error is not None:
            self.errors.append(
                _invalid_rule(f"{at}.rule", _go_rule(rule, optional, self.profile), compiled.error)
            )
        elif rule.message_expression and rule.rule.strip():
            self.message_expression(rule, optional, env, decl, at)
        if compiled.uses_old_self:
            if frozen is not None:
                detail = f"oldSelf cannot be used on the uncorrelatable portion of the schema within {frozen}"
                self.errors.append(FieldError.invalid(f"{at}.rule", rule.rule, detail))
        elif optional is not None:
            detail = "may not be set if oldSelf is not used in rule"
            self.errors.append(FieldError.invalid(f"{at}.optionalOldSelf", optional, detail))

    def message_expression(
        self, rule: Rule, optional: object, env: Env, decl: decltypes.DeclType, at: str
    ) -> None:
        compiled = compile_expression(rule.message_expression, env, decl, message_expression=True)
        if compiled.error is not None:
            rendered = _go_rule(rule, optional, self.profile)
            self.errors.append(_invalid_rule(f"{at}.messageExpression", rendered, compiled.error))
            return
        if compiled.max_cost > STATIC_ESTIMATED_COST_LIMIT:
            message = cost_error_message(
                "estimated messageExpression cost", compiled.max_cost, STATIC_ESTIMATED_COST_LIMIT
            )
            self.errors.append(FieldError.forbidden(f"{at}.messageExpression", message))
        self.observe(f"{at}.messageExpression", compiled.max_cost, STATIC_ESTIMATED_COST_LIMIT)

    def total_errors(self, path: str) -> list[FieldError]:
        if self.total <= STATIC_ESTIMATED_CRD_COST_LIMIT:
            return []
        detail = "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
        errors = [FieldError.forbidden(where, detail) for where, _ in self.expensive]
        name = "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema"
        message = cost_error_message(name, self.total, STATIC_ESTIMATED_CRD_COST_LIMIT)
        errors.append(FieldError.forbidden(path, message))
        return errors


def _child_cardinality(node: SchemaNode, card: int | None) -> int | None:
    """The cardinality of `node`'s children (extractMaxElements times the node's own)."""
    if card is None:
        return None
    if node.type == "object" and node.additional_properties is not None:
        bound = node.max_properties
    elif node.type == "array":
        bound = node.max_items
    else:
        return card
    return None if bound is None else sat_mul(card, max(bound, 0))


_Result = tuple[tuple[FieldError, ...], CostReport]
_CACHE: dict[tuple[str, str, Profile], _Result] = {}
_CACHE_SIZE = 256


def _compute(root: SchemaNode, path: str, profile: Profile) -> _Result:
    walk = _Walk(profile)
    walk.node(root, path, card=1, frozen=None, root=True)
    report = CostReport(tuple(walk.costs), walk.total)
    return tuple(walk.errors + walk.total_errors(path)), report


def _run(root: SchemaNode, path: str, profile: Profile) -> _Result:
    """Computed once per schema text (a node built without its raw mapping is not cached)."""
    if not root.raw:
        return _compute(root, path, profile)
    try:
        key = (json.dumps(root.raw, allow_nan=False), path, profile)
    except (TypeError, ValueError):
        return _compute(root, path, profile)
    found = _CACHE.get(key)
    if found is None:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        found = _CACHE[key] = _compute(root, path, profile)
    return found


def validate_schema_rules(
    root: SchemaNode, path: str, *, profile: Profile = K8S_1_32
) -> list[FieldError]:
    """The CEL errors kube-apiserver reports for the schema rooted at `root`, under `path`
    (e.g. `spec.validation.openAPIV3Schema`)."""
    return list(_run(root, path, profile)[0])


def estimate_rule_costs(root: SchemaNode, path: str, *, profile: Profile = K8S_1_32) -> CostReport:
    """Every rule and messageExpression of the schema with its estimated cost (rules
    including the cardinality of their node) and its limit, and the schema's total."""
    return _run(root, path, profile)[1]
