"""The CEL type checker of the sim (celcheck): what kube-apiserver answers when a CRD rule does
not type-check, worded and located as cel-go words and locates it (the column is the `.` of a
selection, the `(` of a call or of has(), the operator of an operation), and what it accepts.
"""

from __future__ import annotations

from typing import Any

import pytest

from probemarker.sim.crd.schema.cel.celcheck import (
    K8S_1_28,
    K8S_1_32,
    Profile,
    compile_expression,
    rule_env,
    schema_decl_type,
)
from probemarker.sim.crd.schema.node import parse_schema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "count": {"type": "integer"},
        "tags": {"type": "array", "maxItems": 5, "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "port": {"x-kubernetes-int-or-string": True},
        "a-b": {"type": "string"},
        "namespace": {"type": "string"},
        "when": {"type": "string", "format": "date-time"},
        "nested": {"type": "object", "properties": {"x": {"type": "integer"}}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "untyped": {"x-kubernetes-preserve-unknown-fields": True},
    },
}


def compile_rule(
    rule: str,
    schema: dict[str, Any] = SCHEMA,
    *,
    profile: Profile = K8S_1_32,
    message: bool = False,
    optional_old_self: bool = False,
    resource_root: bool = False,
) -> str | None:
    node = parse_schema(schema)
    decl = schema_decl_type(node, resource_root)
    assert decl is not None
    env = rule_env(profile, decl, optional_old_self=optional_old_self)
    return compile_expression(rule, env, decl, message_expression=message).error


def failure(at: int, text: str, source: str, line: int = 1) -> str:
    snippet = source.split("\n")[line - 1]
    return (
        f"compilation failed: ERROR: <input>:{line}:{at}: {text}\n | {snippet}\n | "
        + "." * (at - 1)
        + "^"
    )


@pytest.mark.parametrize(
    ("rule", "at", "text"),
    [
        ("self.nme == 'x'", 5, "undefined field 'nme'"),
        ("has(self.nope)", 4, "undefined field 'nope'"),
        ("self.nested.y == 1", 12, "undefined field 'y'"),
        ("self.x.y.z", 5, "undefined field 'x'"),
        ("self.free.other == 1", 10, "undefined field 'other'"),
        ("self.untyped == 1", 5, "undefined field 'untyped'"),
        (
            "self.count + 'a' == 1",
            12,
            "found no matching overload for '_+_' applied to '(int, string)'",
        ),
        (
            "self.name.size() > 'a'",
            18,
            "found no matching overload for '_>_' applied to '(int, string)'",
        ),
        ("size(self) == 1", 5, "found no matching overload for 'size' applied to '(selfType0)'"),
        ("!self.name", 1, "found no matching overload for '!_' applied to '(string)'"),
        (
            "self.tags[0] == 1",
            14,
            "found no matching overload for '_==_' applied to '(string, int)'",
        ),
        (
            "int(self.name) > 1 ? 'a' : 2",
            20,
            "found no matching overload for '_?_:_' applied to '(bool, string, int)'",
        ),
        (
            "self.name.charAt('x') == ''",
            17,
            "found no matching overload for 'charAt' applied to 'string.(string)'",
        ),
        ("foo(self.name)", 4, "undeclared reference to 'foo' (in container '')"),
        ("self.name.nothing()", 18, "undeclared reference to 'nothing' (in container '')"),
        ("nobody == 1", 1, "undeclared reference to 'nobody' (in container '')"),
        ("self.tags.x == 1", 10, "type 'list(string)' does not support field selection"),
        (
            "self.nested.all(x, true)",
            5,
            "expression of type 'selfType0.nested' cannot be range of a comprehension "
            "(must be list, map, or dynamic)",
        ),
        ("self.count && true", 5, "expected type 'bool' but found 'int'"),
        ("[1, 'a'].size() == 2", 5, "expected type 'int' but found 'string'"),
        ("self.tags.all(1, true)", 15, "argument must be a simple name"),
        ("self.tags.map(1, 2) == []", 15, "argument is not an identifier"),
        ("has(self)", 5, "invalid argument to has() macro"),
        ("self.name.matches('(')", 19, "invalid matches argument"),
        ("duration('1x') > duration('1s')", 10, "invalid duration argument"),
        ("timestamp('2020-13-01T00:00:00Z') < self.when", 11, "invalid timestamp argument"),
    ],
)
def test_type_errors_as_cel_go_reports_them(rule: str, at: int, text: str) -> None:
    assert compile_rule(rule) == failure(at, text, rule)


def test_errors_are_sorted_by_position_and_lines_are_counted() -> None:
    rule = "self.nested.x\n  + self.nme > 1 && self.foo"
    assert compile_rule(rule) == "\n".join(
        [
            failure(9, "undefined field 'nme'", rule, line=2),
            "ERROR: <input>:2:25: undefined field 'foo'\n |   + self.nme > 1 && self.foo\n"
            " | ........................^",
        ]
    )


def test_wide_characters_before_the_error_get_wide_dots() -> None:
    rule = "'\u00e9' + self.nme == 'x'"
    assert compile_rule(rule) == (
        "compilation failed: ERROR: <input>:1:11: undefined field 'nme'\n"
        f" | {rule}\n | .\uff0e........^"
    )


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        ("self.count", "cel expression must evaluate to a bool"),
        ("self.port", "cel expression must evaluate to a bool"),
        ("'x'", "cel expression must evaluate to a bool"),
    ],
)
def test_a_rule_must_be_a_bool(rule: str, error: str) -> None:
    assert compile_rule(rule) == error


def test_a_message_expression_must_be_a_string() -> None:
    assert compile_rule("self.count", message=True) == "messageExpression must evaluate to a string"
    assert compile_rule("'n=' + string(self.count)", message=True) is None
    assert compile_rule("self.nope", message=True) == (
        "messageExpression compilation failed: ERROR: <input>:1:5: undefined field 'nope'\n"
        " | self.nope\n | ....^"
    )


@pytest.mark.parametrize(
    "rule",
    [
        "self.a__dash__b == 'x'",
        "self.count > 1.5",
        "self.port == 5 || self.port.startsWith('a')",
        "type(self.port) == string ? self.port.matches('^[a-z]+$') : self.port > 0",
        "self.labels.all(k, k.startsWith('a') && self.labels[k] != '')",
        "self.tags.map(t, t.size()).sum() > 2",
        "self.tags.filter(t, t.size() > 1).all(t, t.matches('a'))",
        "self.tags.exists_one(t, t == 'x')",
        "sets.contains(self.tags, ['a'])",
        "url(self.name).getHost() == 'a'",
        "quantity(self.name).isGreaterThan(quantity('1'))",
        "ip(self.name).family() == 4 && cidr('10.0.0.0/8').containsIP(self.name)",
        "format.dns1123Label().validate(self.name).hasValue()",
        "optional.of(1).orValue(2) == 1",
        "self.name.lowerAscii().split('-').join('') != ''",
        "self.when < timestamp('2030-01-01T00:00:00Z') && duration('1h') > duration('1m')",
        "has(self.free) && has(self.nested.x)",
        "self.count in [1, 2] && self.name in {'a': 1}",
        "oldSelf.count <= self.count",
    ],
)
def test_rules_that_type_check(rule: str) -> None:
    assert compile_rule(rule) is None


def test_reserved_words_as_field_names_from_1_31() -> None:
    assert compile_rule("self.namespace == 'x'") is None
    assert compile_rule("self.__namespace__ == 'x'") is None
    assert compile_rule("self.namespace == 'x'", profile=K8S_1_28) == failure(
        5, "undefined field 'namespace'", "self.namespace == 'x'"
    )


@pytest.mark.parametrize(
    "rule",
    [
        "self.count > 1.5",
        "sets.contains(self.tags, ['a'])",
        "quantity(self.name).isInteger()",
        "optional.of(1).hasValue()",
        "ip(self.name).family() == 4",
    ],
)
def test_what_1_28_does_not_know(rule: str) -> None:
    """Kubernetes 1.28 compiles new rules with the 1.27 environment: no cross-type numeric
    comparisons, optional types, quantities, sets, IPs or CIDRs."""
    assert compile_rule(rule) is None
    error = compile_rule(rule, profile=K8S_1_28)
    assert error is not None
    assert error.startswith("compilation failed: ERROR: <input>:1:")


def test_resource_root_sees_type_and_object_meta() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object"}}}
    rule = "self.metadata.name.startsWith(self.kind) && self.apiVersion != ''"
    assert compile_rule(rule, schema, resource_root=True) is None
    assert compile_rule("self.metadata.labels == {}", schema, resource_root=True) == failure(
        14, "undefined field 'labels'", "self.metadata.labels == {}"
    )
    rule = "self.metadata.name == ''"
    assert compile_rule(rule, schema) == failure(5, "undefined field 'metadata'", rule)


def test_optional_old_self() -> None:
    schema = {"type": "object", "properties": {"i": {"type": "integer"}, "s": {"type": "string"}}}
    ok = ["self.i >= oldSelf.i.value()", "oldSelf.hasValue() ? self.i >= oldSelf.value().i : true"]
    for rule in ok:
        assert compile_rule(rule, schema, optional_old_self=True) is None
    rule = "self.i >= oldSelf.i"
    assert compile_rule(rule, schema, optional_old_self=True) == failure(
        8, "found no matching overload for '_>=_' applied to '(int, optional_type(int))'", rule
    )
    rule = "self.i >= oldSelf.s.orValue(0)"
    assert compile_rule(rule, schema, optional_old_self=True) == failure(
        28,
        "found no matching overload for 'orValue' applied to 'optional_type(string).(int)'",
        rule,
    )
