"""What a MutatingAdmissionPolicy does to an object at creation. Evaluated as
kube-apiserver's mutating policy plugin evaluates it, with cel-python for CEL.

Stage: a test helper (tests/manifests/test_readiness_gates.py). Input: a policy and its
binding as they ship (YAML), the object being created, and the param objects in its
namespace. Output: an `Admission`: the object as admitted, how many times the policy
ran, and every evaluation error met on the way.

Followed from k8s.io/apiserver/pkg/admission/plugin/policy/mutating (dispatcher.go,
patch/json_patch.go) and policy/generic:
- matching (`matchConstraints.resourceRules`): group, version, operation and resource;
- params: the binding's `paramRef.selector` over the params of the object's namespace
  (a paramRef without a namespace takes the request's); none found: `Allow` admits
  the object unchanged, `Deny` applies failurePolicy;
- one invocation per param, in turn; each sees the object as the ones before it left
  it (the dispatcher updates the versioned object after each patch);
- per invocation: `matchConditions` (false skips it, an error applies failurePolicy),
  `variables` evaluated lazily (an expression reaches only the variables it names, and
  a variable's error is the error of what reads it), then each mutation in order;
- a JSONPatch expression's list of `JSONPatch{op, path, value}` is applied as RFC 6902
  (the operations used here: `add`, with `-` to append); an error applies
  failurePolicy: `Ignore` leaves the object as it was before that invocation.

CEL: `probemarker.sim.crd.schema.cel.engine.compile_cel` (cel-python, with cel-go's
`has()`). cel-python has no `JSONPatch` type: each `JSONPatch{op: A, path: B, value: C}`
is read as the map `{'op': A, 'path': B, 'value': C}` (the same fields); an expression
with any other `JSONPatch` form is refused by `load`. Not modelled, and refused by
`load`: ApplyConfiguration mutations, a binding's matchResources, a paramRef by name,
namespace and object selectors, and reinvocation (the object is created once here, no
webhook follows).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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

__all__ = ["Admission", "MutatingPolicy", "load"]

_JSONPATCH = re.compile(r"JSONPatch\{\s*op:(.*?),\s*path:(.*?),\s*value:", re.S)


@dataclass(frozen=True, slots=True)
class Admission:
    object: dict[str, Any]
    invocations: int  # how many times the policy ran (one per param selected)
    errors: tuple[str, ...] = ()
    mutated: int = 0  # how many invocations got past matchConditions to the mutations
    refused: str | None = None  # failurePolicy Fail and an error: the create is refused


class _Failed(Exception):
    pass


@dataclass(frozen=True, slots=True)
class MutatingPolicy:
    name: str
    failure_policy: str
    rules: tuple[Mapping[str, Any], ...]
    param_selector: Mapping[str, Any]
    not_found: str
    match_conditions: tuple[Expression, ...]
    variables: tuple[tuple[str, Expression], ...]
    mutations: tuple[Expression, ...]

    def expressions(self) -> list[Expression]:
        return [*self.match_conditions, *(e for _, e in self.variables), *self.mutations]

    def _matches(self, operation: str, group: str, version: str, resource: str) -> bool:
        def one_of(values: Sequence[str], value: str) -> bool:
            return "*" in values or value in values

        return any(
            one_of(r.get("apiGroups", []), group)
            and one_of(r.get("apiVersions", []), version)
            and one_of(r.get("operations", []), operation)
            and one_of(r.get("resources", []), resource)
            for r in self.rules
        )

    def create(
        self, obj: Mapping[str, Any], params: Sequence[Mapping[str, Any]], *, namespace: str,
        resource: tuple[str, str, str] = ("", "v1", "pods"),
    ) -> Admission:  # fmt: skip
        """Admit the creation of `obj` in `namespace`, with `params` the param objects
        that exist (of any namespace: the binding picks those of `namespace`)."""
        current = copy.deepcopy(dict(obj))
        if not self._matches("CREATE", *resource):
            return Admission(current, 0)
        selected = [
            p
            for p in params
            if p.get("metadata", {}).get("namespace") == namespace
            and _selects(self.param_selector, p.get("metadata", {}).get("labels") or {})
        ]
        if not selected:
            if self.not_found == "Allow":
                return Admission(current, 0)
            return self._failure(current, 0, ["no params found"], "no params found")
        errors: list[str] = []
        mutated = 0
        request = {"operation": "CREATE", "namespace": namespace}
        for param in selected:
            try:
                current, reached = self._invoke(current, param, request)
                mutated += reached
            except _Failed as exc:
                errors.append(str(exc))
                if self.failure_policy != "Ignore":
                    return self._failure(current, len(selected), errors, str(exc))
        return Admission(current, len(selected), tuple(errors), mutated=mutated)

    def _failure(
        self, obj: dict[str, Any], invocations: int, errors: list[str], why: str
    ) -> Admission:
        if self.failure_policy == "Ignore":
            return Admission(obj, invocations, tuple(errors))
        return Admission(obj, invocations, tuple(errors), refused=why)

    def _invoke(
        self, obj: dict[str, Any], param: Mapping[str, Any], request: Mapping[str, Any]
    ) -> tuple[dict[str, Any], bool]:
        """The object after this invocation, and whether it reached the mutations."""
        activation = {
            "object": json_to_cel(obj),
            "oldObject": json_to_cel(None),
            "params": json_to_cel(dict(param)),
            "request": json_to_cel(dict(request)),
        }
        results: list[bool | str] = []
        for condition in self.match_conditions:
            try:
                results.append(is_true(self._evaluate(condition, activation, {})))
            except _Failed as exc:
                results.append(str(exc))
        outcome = conditions_outcome(results)
        if outcome is False:
            return obj, False
        if isinstance(outcome, str):
            raise _Failed(outcome)
        values: dict[str, Any] = {}
        out = obj
        for mutation in self.mutations:
            result = self._evaluate(mutation, activation, values)
            out = _apply(out, [_native(op) for op in result], mutation.where)
        return out, True

    def _evaluate(
        self, expression: Expression, activation: Mapping[str, Any], values: dict[str, Any]
    ) -> Any:
        """Lazily: the variables `expression` names, each evaluated once."""
        for name in expression.variables:
            if name not in values:
                definition = dict(self.variables).get(name)
                if definition is None:
                    raise _Failed(f"{expression.where}: no such variable: {name}")
                values[name] = self._evaluate(definition, activation, values)
        bound = celtypes.MapType({celtypes.StringType(k): v for k, v in values.items()})
        try:
            return expression.program.evaluate({**activation, "variables": bound})
        except CelError as exc:
            raise _Failed(f"{expression.where}: {exc}") from exc


def _native(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _native(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_native(v) for v in value]
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.IntType | celtypes.UintType):
        return int(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    return value


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    if selector.get("matchExpressions"):
        raise ValueError("paramRef.selector.matchExpressions: not modelled")
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise _Failed(f"JSON patch path {path!r}: not a JSON pointer")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _apply(obj: dict[str, Any], ops: list[dict[str, Any]], where: str) -> dict[str, Any]:
    """RFC 6902 `add` (the one operation the policies here use); anything else fails."""
    out = copy.deepcopy(obj)
    for op in ops:
        if op.get("op") != "add":
            raise _Failed(f"{where}: JSON patch op {op.get('op')!r}: not modelled")
        *parents, last = _pointer(op["path"])
        target: Any = out
        for part in parents:
            try:
                target = target[int(part)] if isinstance(target, list) else target[part]
            except (KeyError, IndexError, ValueError) as exc:
                raise _Failed(
                    f"JSONPath: add operation does not apply: doc is missing path: {op['path']}"
                ) from exc
        value = copy.deepcopy(op["value"])
        if isinstance(target, list):
            if last == "-":
                target.append(value)
            else:
                target.insert(int(last), value)
        elif isinstance(target, dict):
            target[last] = value
        else:
            raise _Failed(f"JSONPath: add operation does not apply: {op['path']}")
    return out


def _map_jsonpatch(where: str, source: str) -> str:
    rewritten = _JSONPATCH.sub(lambda m: f"{{'op':{m[1]}, 'path':{m[2]}, 'value':", source)
    if "JSONPatch" in rewritten:
        raise ValueError(f"{where}: a JSONPatch form this evaluator does not read: {source}")
    return rewritten


def load(policy_path: Path, binding_path: Path) -> MutatingPolicy:
    """The policy and binding of two manifests; refuses features the evaluator lacks."""
    policy = yaml.safe_load(policy_path.read_text())
    binding = yaml.safe_load(binding_path.read_text())
    spec, bspec = policy["spec"], binding["spec"]
    constraints = spec["matchConstraints"]
    unsupported = [
        f"spec.matchConstraints.{k}"
        for k in ("excludeResourceRules", "namespaceSelector", "objectSelector")
        if k in constraints
    ]
    unsupported += [f"binding spec.{k}" for k in ("matchResources",) if k in bspec]
    ref = bspec.get("paramRef") or {}
    unsupported += [f"binding spec.paramRef.{k}" for k in ("name", "namespace") if k in ref]
    unsupported += [
        f"spec.mutations[{i}].patchType {m.get('patchType')}"
        for i, m in enumerate(spec["mutations"])
        if m.get("patchType") != "JSONPatch"
    ]
    if unsupported:
        raise ValueError(f"{policy_path}: not modelled by this evaluator: {', '.join(unsupported)}")
    if bspec.get("policyName") != policy["metadata"]["name"]:
        raise ValueError(f"{binding_path}: binds {bspec.get('policyName')!r}, not this policy")
    return MutatingPolicy(
        name=policy["metadata"]["name"],
        failure_policy=spec.get("failurePolicy", "Fail"),
        rules=tuple(constraints["resourceRules"]),
        param_selector=ref.get("selector") or {},
        not_found=ref.get("parameterNotFoundAction", "Deny"),
        match_conditions=compile_match_conditions(spec),
        variables=compile_variables(spec),
        mutations=tuple(
            compile_expression(
                f"spec.mutations[{i}].jsonPatch.expression",
                _map_jsonpatch(f"spec.mutations[{i}]", m["jsonPatch"]["expression"]),
            )
            for i, m in enumerate(spec["mutations"])
        ),
    )
