"""How the test evaluators decide on matchConditions (tests/admission_cel.py), as
k8s.io/apiserver's matcher does: every result is in before one is looked at."""

from __future__ import annotations

import pytest

from tests.admission_cel import compile_expression, conditions_outcome


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        ([], True),
        ([True, True], True),
        ([True, False], False),
        # a false one skips the policy whatever errors came before or after it
        (["spec.matchConditions[0].expression: no such key: spec", False], False),
        ([False, "boom"], False),
        # with none false, the first error is the policy's
        ([True, "first", "second"], "first"),
    ],
)
def test_conditions_outcome(results: list[bool | str], expected: bool | str) -> None:
    assert conditions_outcome(results) == expected


def test_an_expression_names_each_variable_once_in_order() -> None:
    expression = compile_expression("x", "variables.b + variables.a + variables.b")
    assert expression.variables == ("b", "a")
