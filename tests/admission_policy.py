"""Would a ValidatingAdmissionPolicy admit this request? Evaluated as kube-apiserver's
validating policy plugin evaluates it, with cel-python for CEL.

Stage: a test helper (tests/manifests/test_node_scope.py). Input: a policy and its
binding as they ship (YAML), an admission request shaped as kube-apiserver builds it,
the object after the write and the object before it. Output: a `Decision`: whether the
policy matched, whether it allows, the denial message as the API server words it, and
every evaluation error met on the way.

Followed from k8s.io/apiserver/pkg/admission/plugin/policy/validating (1.32):
- matching (`matchConstraints.resourceRules`): group, version, operation and resource;
  `pods` matches the main resource only, `pods/status` the subresource, `*` and `*/x`
  as wildcards (a PATCH is an UPDATE);
- `matchConditions`: all are evaluated; one false skips the policy whatever errors the
  others had, else an error applies `failurePolicy` (tests/admission_cel.py);
- `variables`: evaluated in order, each sees those before it (composition.go); an
  expression that refers to a variable whose evaluation failed fails with that error;
- `validations`: every one is evaluated and every `messageExpression` too (validator.go
  computes all messages before it knows which validation failed); the first that fails
  decides. Its message is the messageExpression's string (trimmed; dropped when it is
  empty, longer than 5000 bytes or spans lines), else `message`, else `failed
  expression: ...`; an evaluation error is a denial with the error (failurePolicy Fail)
  and is also recorded in `Decision.errors`;
- the denial reads `ValidatingAdmissionPolicy 'P' with binding 'B' denied request: M`
  (dispatcher.go), with the validation's `reason` (default Invalid).

CEL: `probemarker.sim.crd.schema.cel.engine.compile_cel`, cel-python with cel-go's `has()`
(an error, not false, when the operand itself cannot be evaluated) and cel-go's error wording.
Values are converted from JSON as the API server's unstructured objects are (objects and
oldObject are `dyn` in an admission policy). Not modelled, and refused by `load` so a
policy that uses them is not silently misjudged: params, audit annotations, namespace
and object selectors, excluded rules, authorizer checks, and bindings with anything but
`validationActions: [Deny]`. cel-go compares values of different types as unequal
(heterogeneous equality); cel-python raises instead. The Pod schema gives every field one
type, so the comparisons the samples make never mix types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from celpy import celtypes, json_to_cel

from probemarker.sim.crd.schema.cel.engine import CelError
from tests.admission_cel import (
    Expression,
    compile_expression,
    compile_match_conditions,
    compile_variables,
    conditions_outcome,
    is_true,
)

__all__ = [
    "Decision",
    "Expression",
    "Policy",
    "load",
]

MAX_MESSAGE_BYTES = 5000  # celconfig.MaxEvaluatedMessageExpressionSizeBytes
_UNSUPPORTED_SPEC = ("paramKind", "auditAnnotations")
_UNSUPPORTED_CONSTRAINTS = ("excludeResourceRules", "namespaceSelector", "objectSelector")


@dataclass(frozen=True, slots=True)
class Validation:
    expression: Expression
    message: str
    message_expression: Expression | None
    reason: str


@dataclass(frozen=True, slots=True)
class Decision:
    matched: bool
    allowed: bool
    message: str = ""  # the denial as the API server words it
    reason: str = ""  # the Status reason of a denial (Forbidden, Invalid, ...)
    errors: tuple[str, ...] = ()  # every evaluation error, of any expression
    messages: tuple[str, ...] = field(default=())  # every messageExpression's result


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    binding: str
    failure_policy: str
    rules: tuple[Mapping[str, Any], ...]
    match_conditions: tuple[Expression, ...]
    variables: tuple[tuple[str, Expression], ...]
    validations: tuple[Validation, ...]

    def expressions(self) -> list[Expression]:
        """Every CEL expression the policy holds, in document order."""
        out = [*self.match_conditions, *(e for _, e in self.variables)]
        for v in self.validations:
            out.append(v.expression)
            if v.message_expression is not None:
                out.append(v.message_expression)
        return out

    def matches_request(self, request: Mapping[str, Any]) -> bool:
        resource = request["resource"]
        return any(
            _rule_matches(rule, request["operation"], resource, request.get("subResource", ""))
            for rule in self.rules
        )

    def admit(
        self,
        request: Mapping[str, Any],
        obj: Mapping[str, Any] | None,
        old: Mapping[str, Any] | None,
    ) -> Decision:
        if not self.matches_request(request):
            return Decision(matched=False, allowed=True)
        activation: dict[str, Any] = {
            "request": json_to_cel(dict(request)),
            "object": json_to_cel(obj),
            "oldObject": json_to_cel(old),
        }
        errors: list[str] = []
        results = [_evaluate(condition, activation, {}) for condition in self.match_conditions]
        outcome = conditions_outcome(
            [r.error if isinstance(r, _Failed) else is_true(r) for r in results]
        )
        if outcome is False:
            return Decision(matched=False, allowed=True)
        if isinstance(outcome, str):
            errors.append(outcome)
            return self._error(outcome, errors)
        failed: dict[str, str] = {}
        values: dict[str, Any] = {}
        for name, expression in self.variables:
            value = _evaluate(expression, activation, values, failed)
            if isinstance(value, _Failed):
                failed[name] = value.error
                errors.append(value.error)
            else:
                values[name] = value
        results = [_evaluate(v.expression, activation, values, failed) for v in self.validations]
        messages = [
            None
            if v.message_expression is None
            else _evaluate(v.message_expression, activation, values, failed)
            for v in self.validations
        ]
        errors += [r.error for r in [*results, *messages] if isinstance(r, _Failed)]
        shown = tuple(str(m) for m in messages if isinstance(m, str))
        for validation, result, message in zip(self.validations, results, messages, strict=True):
            if isinstance(result, _Failed):
                return self._error(result.error, errors, shown)
            if is_true(result):
                continue
            # A non-string result (null, an int) falls back to `message`, as does an error.
            text = str(message).strip() if isinstance(message, str) else ""
            if len(text.encode()) > MAX_MESSAGE_BYTES or "\n" in text:
                text = ""
            text = text or validation.message.strip()
            text = text or f"failed expression: {validation.expression.source.strip()}"
            return Decision(
                matched=True,
                allowed=False,
                message=self._denied(text),
                reason=validation.reason,
                errors=tuple(errors),
                messages=shown,
            )
        return Decision(matched=True, allowed=True, errors=tuple(errors), messages=shown)

    def _denied(self, text: str) -> str:
        return (
            f"ValidatingAdmissionPolicy '{self.name}' with binding '{self.binding}' "
            f"denied request: {text}"
        )

    def _error(self, error: str, errors: list[str], shown: tuple[str, ...] = ()) -> Decision:
        if self.failure_policy == "Ignore":
            return Decision(matched=True, allowed=True, errors=tuple(errors), messages=shown)
        return Decision(
            matched=True,
            allowed=False,
            message=self._denied(error),
            reason="Invalid",
            errors=tuple(errors),
            messages=shown,
        )


@dataclass(frozen=True, slots=True)
class _Failed:
    error: str


def _evaluate(
    expression: Expression,
    activation: Mapping[str, Any],
    values: Mapping[str, Any],
    failed: Mapping[str, str] | None = None,
) -> Any:
    """The expression's CEL value, or _Failed."""
    for name in sorted(expression.variables):
        if failed and name in failed:
            return _Failed(failed[name])
        if name not in values:
            return _Failed(f"{expression.where}: no such variable: {name}")
    variables = celtypes.MapType({celtypes.StringType(k): v for k, v in values.items()})
    try:
        return expression.program.evaluate({**activation, "variables": variables})
    except CelError as exc:
        return _Failed(f"{expression.where}: {exc}")


def _rule_matches(rule: Mapping[str, Any], operation: str, resource: Mapping[str, str],
                  subresource: str) -> bool:  # fmt: skip
    def one_of(values: Sequence[str], value: str) -> bool:
        return "*" in values or value in values

    if not (
        one_of(rule.get("apiGroups", []), resource["group"])
        and one_of(rule.get("apiVersions", []), resource["version"])
        and one_of(rule.get("operations", []), operation)
    ):
        return False
    name = resource["resource"]
    for entry in rule.get("resources", []):
        main, _, sub = entry.partition("/")
        if not sub and not subresource and main in ("*", name):
            return True
        if sub and subresource and main in ("*", name) and sub in ("*", subresource):
            return True
    return False


def load(policy_path: Path, binding_path: Path) -> Policy:
    """The policy and binding of two manifests; refuses features the evaluator lacks."""
    policy = yaml.safe_load(policy_path.read_text())
    binding = yaml.safe_load(binding_path.read_text())
    spec, bspec = policy["spec"], binding["spec"]
    constraints = spec["matchConstraints"]
    unsupported = [f"spec.{k}" for k in _UNSUPPORTED_SPEC if k in spec]
    unsupported += [
        f"spec.matchConstraints.{k}" for k in _UNSUPPORTED_CONSTRAINTS if k in constraints
    ]
    unsupported += [f"binding spec.{k}" for k in ("paramRef", "matchResources") if k in bspec]
    if bspec.get("validationActions") != ["Deny"]:
        unsupported.append("binding validationActions other than [Deny]")
    if unsupported:
        raise ValueError(f"{policy_path}: not modelled by this evaluator: {', '.join(unsupported)}")
    if bspec.get("policyName") != policy["metadata"]["name"]:
        raise ValueError(f"{binding_path}: binds {bspec.get('policyName')!r}, not this policy")
    return Policy(
        name=policy["metadata"]["name"],
        binding=binding["metadata"]["name"],
        failure_policy=spec.get("failurePolicy", "Fail"),
        rules=tuple(constraints["resourceRules"]),
        match_conditions=compile_match_conditions(spec),
        variables=compile_variables(spec),
        validations=tuple(
            Validation(
                expression=compile_expression(f"spec.validations[{i}].expression", v["expression"]),
                message=v.get("message", ""),
                message_expression=(
                    compile_expression(
                        f"spec.validations[{i}].messageExpression", v["messageExpression"]
                    )
                    if "messageExpression" in v
                    else None
                ),
                reason=v.get("reason", "Invalid"),
            )
            for i, v in enumerate(spec["validations"])
        ),
    )
