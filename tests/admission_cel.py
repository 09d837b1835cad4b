"""What the two admission-policy evaluators share (tests/admission_policy.py for a
ValidatingAdmissionPolicy, tests/mutating_policy.py for a MutatingAdmissionPolicy):
a compiled CEL expression and the variables it names, the policy's matchConditions and
variables compiled from its spec, and how the API server decides on matchConditions.

Stage: a test helper. matchConditions as k8s.io/apiserver's `matchconditions` matcher
decides them: every condition is evaluated (`Filter.ForInput` over all of them) before
any result is looked at; one that is false skips the policy, whatever errors the others
had; with none false, an error is the policy's error (its failurePolicy applies).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from celpy import celtypes

from probemarker.sim.crd.schema.cel.engine import CelProgram, compile_cel

__all__ = [
    "Expression",
    "compile_expression",
    "compile_match_conditions",
    "compile_variables",
    "conditions_outcome",
    "is_true",
]

_VARIABLE_REF = re.compile(r"\bvariables\.([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True, slots=True)
class Expression:
    """One CEL expression of the policy, where it is, and its compiled program."""

    where: str  # e.g. spec.validations[2].expression
    source: str
    program: CelProgram

    @property
    def variables(self) -> tuple[str, ...]:
        """The variables it names, each once, in the order it names them."""
        return tuple(dict.fromkeys(_VARIABLE_REF.findall(self.source)))


def compile_expression(where: str, source: str) -> Expression:
    return Expression(where=where, source=source, program=compile_cel(source))


def compile_match_conditions(spec: Mapping[str, Any]) -> tuple[Expression, ...]:
    return tuple(
        compile_expression(f"spec.matchConditions[{i}].expression", c["expression"])
        for i, c in enumerate(spec.get("matchConditions", []))
    )


def compile_variables(spec: Mapping[str, Any]) -> tuple[tuple[str, Expression], ...]:
    return tuple(
        (v["name"], compile_expression(f"spec.variables[{i}].expression", v["expression"]))
        for i, v in enumerate(spec.get("variables", []))
    )


def is_true(value: Any) -> bool:
    """A CEL `true` (celpy gives BoolType, or a Python bool after a macro)."""
    return value is True or (isinstance(value, celtypes.BoolType) and bool(value))


def conditions_outcome(results: Sequence[bool | str]) -> bool | str:
    """The matcher's decision from each condition's result (True, False, or its error
    text): False when one is false, else the first error, else True."""
    if any(result is False for result in results):
        return False
    return next((result for result in results if isinstance(result, str)), True)
