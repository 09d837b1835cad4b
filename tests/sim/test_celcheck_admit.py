"""The CEL part of CRD admission (celadmit.validate_schema_rules) as apiextensions 1.32 reports
it: which errors, on which paths, with which values, in which order; rule costs multiplied by
the cardinality of their node; the schema-wide total and its most expensive contributors.
"""

from __future__ import annotations

from typing import Any

import pytest

from probemarker.sim.crd.schema.cel.celcheck import K8S_1_28
from probemarker.sim.crd.schema.node import parse_schema
from probemarker.sim.crd.validation import celadmit

ROOT = "spec.validation.openAPIV3Schema"
TRY = (
    "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, "
    "maps, and strings are declared)"
)
CONTRIBUTED = (
    "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire "
    "OpenAPIv3 schema"
)


def messages(schema: dict[str, Any], **options: Any) -> list[str]:
    return [
        e.message for e in celadmit.validate_schema_rules(parse_schema(schema), ROOT, **options)
    ]


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def ruled(schema: dict[str, Any], *rules: dict[str, Any] | str) -> dict[str, Any]:
    entries = [{"rule": r} if isinstance(r, str) else r for r in rules]
    return {**schema, "x-kubernetes-validations": entries}


def go_rule(rule: str, message: str = "", expression: str = "", field_path: str = "") -> str:
    return (
        f'apiextensions.ValidationRule{{Rule:"{rule}", Message:"{message}", '
        f'MessageExpression:"{expression}", Reason:(*apiextensions.FieldValueErrorReason)(nil), '
        f'FieldPath:"{field_path}", OptionalOldSelf:(*bool)(nil)}}'
    )


def test_a_compile_error_shows_the_rule_as_go_prints_it() -> None:
    schema = obj(s=ruled(obj(a={"type": "string"}), {"rule": "self.b == 1", "message": "m"}))
    where = f"{ROOT}.properties[s].x-kubernetes-validations[0].rule"
    assert messages(schema) == [
        f"{where}: Invalid value: {go_rule('self.b == 1', message='m')}: compilation failed: "
        "ERROR: <input>:1:5: undefined field 'b'\n | self.b == 1\n | ....^"
    ]


def test_1_28_prints_the_rule_without_optional_old_self() -> None:
    schema = obj(s=ruled({"type": "string"}, "self"))
    (message,) = messages(schema, profile=K8S_1_28)
    assert message.endswith(
        'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:""}: '
        "cel expression must evaluate to a bool"
    )


def test_message_expression_errors() -> None:
    rules = [
        {"rule": "self == 'a'", "messageExpression": "1"},
        {"rule": "self == 'a'", "messageExpression": "self.x"},
        {"rule": "self.x", "messageExpression": "1"},
    ]
    schema = obj(s=ruled({"type": "string"}, *rules))
    at = f"{ROOT}.properties[s].x-kubernetes-validations"
    equals = "self == 'a'"
    no_field = "type 'string' does not support field selection\n | self.x\n | ....^"
    assert messages(schema) == [
        f"{at}[0].messageExpression: Invalid value: {go_rule(equals, expression='1')}: "
        "messageExpression must evaluate to a string",
        f"{at}[1].messageExpression: Invalid value: {go_rule(equals, expression='self.x')}: "
        f"messageExpression compilation failed: ERROR: <input>:1:5: {no_field}",
        f"{at}[2].rule: Invalid value: {go_rule('self.x', expression='1')}: compilation failed: "
        f"ERROR: <input>:1:5: {no_field}",
    ]


def test_old_self_where_old_and_new_values_do_not_correlate() -> None:
    transition = {"rule": "self == oldSelf"}
    schema = obj(
        listed={
            "type": "array",
            "maxItems": 1,
            "items": ruled({"type": "string", "maxLength": 1}, transition),
        },
        keyed={
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"],
            "maxItems": 1,
            "items": ruled(
                {**obj(k={"type": "string", "maxLength": 1}), "required": ["k"]}, transition
            ),
        },
        atomic={
            "type": "object",
            "x-kubernetes-map-type": "atomic",
            "properties": {"in": ruled({"type": "integer"}, transition)},
        },
        # an atomic map correlates like a granular one (MapIsCorrelatable), through its
        # properties and its additionalProperties
        values={
            "type": "object",
            "x-kubernetes-map-type": "atomic",
            "additionalProperties": ruled({"type": "integer"}, transition),
        },
    )
    detail = "oldSelf cannot be used on the uncorrelatable portion of the schema within"
    assert messages(schema) == [
        f'{ROOT}.properties[listed].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": '
        f"{detail} {ROOT}.properties[listed]",
    ]


def test_optional_old_self_needs_old_self() -> None:
    schema = obj(
        a=ruled({"type": "integer"}, {"rule": "self > 0", "optionalOldSelf": True}),
        b=ruled({"type": "integer"}, {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": True}),
    )  # fmt: skip
    assert messages(schema) == [
        f"{ROOT}.properties[a].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: "
        "may not be set if oldSelf is not used in rule"
    ]


def test_children_are_reported_before_their_parent() -> None:
    schema = ruled(
        obj(
            m={"type": "object", "additionalProperties": ruled({"type": "string"}, "self.a")},
            p=ruled({"type": "string"}, "self.b"),
            l={"type": "array", "items": ruled({"type": "string"}, "self.c")},
        ),
        "self.d",
    )
    paths = [m.split(": ", 1)[0] for m in messages(schema)]
    assert paths == [
        f"{ROOT}.properties[m].additionalProperties.x-kubernetes-validations[0].rule",
        f"{ROOT}.properties[p].x-kubernetes-validations[0].rule",
        f"{ROOT}.properties[l].items.x-kubernetes-validations[0].rule",
        f"{ROOT}.x-kubernetes-validations[0].rule",
    ]


def rule_costs(schema: dict[str, Any]) -> list[int]:
    return [r.cost for r in celadmit.estimate_rule_costs(parse_schema(schema), ROOT).rules]


def test_cardinality_is_the_product_of_the_bounds_above() -> None:
    leaf = ruled({"type": "string", "maxLength": 4}, "self.startsWith('a')")  # cost 2
    bounded = {
        "type": "array",
        "maxItems": 3,
        "items": obj(m={"type": "object", "maxProperties": 5, "additionalProperties": leaf}),
    }
    unbounded = {
        "type": "array",
        "items": obj(m={"type": "object", "maxProperties": 5, "additionalProperties": leaf}),
    }
    assert rule_costs(obj(l=bounded)) == [2 * 3 * 5]
    # Under an unbounded list: as many strings as fit in a request (3 MiB / (2 + 1)).
    assert rule_costs(obj(l=unbounded)) == [2 * (3 * 1024 * 1024 // 3)]


def test_a_rule_over_budget() -> None:
    schema = obj(l={"type": "array", "items": ruled({"type": "string"}, "self == oldSelf")})
    at = f"{ROOT}.properties[l].items.x-kubernetes-validations[0].rule"
    assert messages(schema) == [
        f"{at}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {TRY}",
        f'{at}: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable '
        f"portion of the schema within {ROOT}.properties[l]",
        f"{at}: {CONTRIBUTED}",
        f"{ROOT}: Forbidden: x-kubernetes-validations estimated rule cost total for entire "
        f"OpenAPIv3 schema exceeds budget by factor of more than 100x {TRY}",
    ]


@pytest.mark.parametrize(
    ("cost", "factor"),
    [
        (10_000_450, "1.000045x"),
        (14_950_000, "1.495000x"),
        (15_000_000, "1.5x"),
        (22_500_000, "2.2x"),
        (1_000_000_000, "100.0x"),
        (1_000_000_001, "more than 100x"),
    ],
)
def test_the_budget_factor_is_worded_as_go_formats_it(cost: int, factor: str) -> None:
    assert celadmit.cost_error_message("x", cost, 10_000_000) == (
        f"x exceeds budget by factor of {factor} {TRY}"
    )


def test_the_four_most_expensive_rules_of_at_least_one_percent_are_named() -> None:
    def costly(items: int) -> dict[str, Any]:
        """A list whose item rule costs 2 (startsWith a literal) times `items`."""
        item = ruled({"type": "string"}, "self.startsWith('a')")
        return {"type": "array", "maxItems": items, "items": item}

    million = 1_000_000
    schema = obj(
        a=costly(9 * million), b=costly(10 * million), c=costly(8 * million),
        d=costly(10 * million), e=costly(15 * million), f=costly(499_999),
        cheap=ruled({"type": "string"}, "self.startsWith('a')"),
    )  # fmt: skip
    rule = "items.x-kubernetes-validations[0].rule"
    got = messages(schema)
    over = [m.split(": ", 1)[0] for m in got if "exceeds budget" in m and "[" in m.split(": ")[0]]
    assert over == [f"{ROOT}.properties[{p}].{rule}" for p in "abcde"]
    assert [m for m in got if "contributed" in m] == [
        f"{ROOT}.properties[{p}].{rule}: {CONTRIBUTED}" for p in "ebda"
    ]
    total = 2 * million * (9 + 10 + 8 + 10 + 15) + 2 * 499_999 + 2
    assert total == 105_000_000
    assert got[-1] == (
        f"{ROOT}: Forbidden: x-kubernetes-validations estimated rule cost total for entire "
        f"OpenAPIv3 schema exceeds budget by factor of 1.050000x {TRY}"
    )


def test_a_node_cel_cannot_see_is_an_internal_error() -> None:
    schema = obj(u=ruled({"x-kubernetes-preserve-unknown-fields": True}, "true"))
    assert messages(schema) == [
        f"{ROOT}.properties[u].x-kubernetes-validations: Internal error: internal error: failed "
        "to construct type information for x-kubernetes-validations rules: unable to convert "
        "structural schema to CEL declarations"
    ]
