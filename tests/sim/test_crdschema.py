"""probemarker.sim.crd.schema.structural: pruning, defaulting, OpenAPI and CEL validation,
Status wording; and CRD checks (probemarker.sim.crd.validation.definition). Expected strings
are the ones kube-apiserver (1.32+) sends for the same input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from probemarker.sim.crd.gotext.fielderr import go_float, go_quote
from probemarker.sim.crd.schema.structural import (
    FieldError,
    StructuralSchema,
    invalid_status_message,
    status_causes,
)
from probemarker.sim.crd.validation.definition import validate_crd

NOT_CHECKED = (
    "<nil>: Invalid value: null: some validation rules were not checked because the object "
    "was invalid; correct the existing errors to complete validation"
)


def schema_of(spec: dict[str, Any], **root: Any) -> StructuralSchema:
    raw = {"type": "object", "properties": {"spec": spec}, **root}
    return StructuralSchema.from_crd_version({"name": "v1", "schema": {"openAPIV3Schema": raw}})


def resource(spec: Any, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "a"}, "spec": spec, **extra}


def messages(errors: list[FieldError]) -> list[str]:
    return [e.message for e in errors]


# --- pruning -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec_schema", "spec", "expected"),
    [
        pytest.param(
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"a": "x", "b": 1},
            {"a": "x"},
            id="unknown-property-dropped",
        ),
        pytest.param(
            {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            {"a": {"b": [1]}},
            {"a": {"b": [1]}},
            id="preserve-unknown-keeps-all",
        ),
        pytest.param(
            {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {
                    "known": {"type": "object", "properties": {"k": {"type": "string"}}}
                },
            },
            {"other": 1, "known": {"k": "v", "junk": 2}},
            {"other": 1, "known": {"k": "v"}},
            id="preserve-unknown-still-prunes-specified-subtrees",
        ),
        pytest.param(
            {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"v": {"type": "integer"}},
                },
            },
            {"k1": {"v": 1, "w": 2}},
            {"k1": {"v": 1}},
            id="map-values-pruned-by-their-schema",
        ),
        pytest.param(
            {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
            [{"n": "a", "x": 1}, {"y": 2}],
            [{"n": "a"}, {}],
            id="list-items-pruned",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {
                    "e": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": True,
                        "properties": {"spec": {"type": "object"}},
                    }
                },
            },
            {
                "e": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "p"},
                    "spec": {},
                    "junk": 1,
                }
            },
            {"e": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}},
            id="embedded-resource-keeps-type-and-object-meta",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "n": {"type": "string", "nullable": True}},
            },
            {"a": None, "n": None},
            {"n": None},
            id="null-dropped-unless-nullable",
        ),
    ],
)
def test_pruning(spec_schema: dict[str, Any], spec: Any, expected: Any) -> None:
    admitted, _ = schema_of(spec_schema).admit(resource(spec))
    assert admitted["spec"] == expected


def test_root_keeps_type_meta_and_metadata_but_drops_unknown() -> None:
    obj = resource({}, extra=1)
    obj["metadata"] = {"name": "a", "labels": {"x": "y"}}
    admitted, errors = schema_of({"type": "object"}).admit(obj)
    assert admitted == {
        "apiVersion": "x.io/v1",
        "kind": "X",
        "metadata": obj["metadata"],
        "spec": {},
    }
    assert errors == []


def test_unknown_fields_are_reported_for_strict_field_validation() -> None:
    schema = schema_of(
        {
            "type": "object",
            "properties": {
                "p": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"a": {"type": "integer"}}},
                }
            },
        }
    )
    obj = resource({"p": [{"a": 1, "typo": 2}], "extra": {}}, specs=1)
    assert schema.unknown_fields(obj) == ["spec.extra", "spec.p[0].typo", "specs"]


def test_input_is_never_mutated() -> None:
    obj = resource({"a": None, "b": 1})
    before = yaml.safe_dump(obj)
    schema_of({"type": "object", "properties": {"a": {"type": "string", "default": "d"}}}).admit(
        obj
    )
    assert yaml.safe_dump(obj) == before


# --- defaulting ----------------------------------------------------------------------------

_PROBE = {
    "type": "object",
    "properties": {
        "probe": {
            "type": "object",
            "properties": {
                "period": {"type": "integer", "default": 10},
                "scheme": {"type": "string", "default": "HTTP"},
                "nested": {
                    "type": "object",
                    "default": {},
                    "properties": {"x": {"type": "integer", "default": 1}},
                },
            },
        },
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"t": {"type": "integer", "default": 3}}},
        },
        "map": {"type": "object", "additionalProperties": {"type": "string", "default": "m"}},
    },
}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({}, {}, id="missing-parent-not-created"),
        pytest.param(
            {"probe": {}},
            {"probe": {"period": 10, "scheme": "HTTP", "nested": {"x": 1}}},
            id="defaults-inside-defaults",
        ),
        pytest.param(
            {"probe": {"period": 3}},
            {"probe": {"period": 3, "scheme": "HTTP", "nested": {"x": 1}}},
            id="given-value-kept",
        ),
        pytest.param(
            {"probe": {"period": None}},
            {"probe": {"period": 10, "scheme": "HTTP", "nested": {"x": 1}}},
            id="null-replaced-by-default",
        ),
        pytest.param(
            {"items": [{}, {"t": 1}]}, {"items": [{"t": 3}, {"t": 1}]}, id="list-items-defaulted"
        ),
        pytest.param({"map": {"k": None}}, {"map": {"k": "m"}}, id="null-map-value-defaulted"),
        pytest.param(
            {"probe": {"junk": 1}},
            {"probe": {"period": 10, "scheme": "HTTP", "nested": {"x": 1}}},
            id="pruning-before-defaulting",
        ),
    ],
)
def test_defaulting(spec: Any, expected: Any) -> None:
    admitted, errors = schema_of(_PROBE).admit(resource(spec))
    assert admitted["spec"] == expected
    assert errors == []


# --- OpenAPI validation --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        pytest.param(
            {"type": "integer"},
            "x",
            ['spec.f: Invalid value: "string": spec.f in body must be of type integer: "string"'],
            id="type",
        ),
        pytest.param({"type": "integer"}, 1.0, [], id="integral-float-is-an-integer"),
        pytest.param(
            {"type": "integer"},
            1.5,
            ['spec.f: Invalid value: "number": spec.f in body must be of type integer: "number"'],
            id="fraction-is-not-an-integer",
        ),
        pytest.param({"type": "number"}, 2, [], id="integer-is-a-number"),
        pytest.param(
            {"type": "boolean"},
            1,
            ['spec.f: Invalid value: "integer": spec.f in body must be of type boolean: "integer"'],
            id="int-is-not-bool",
        ),
        pytest.param(
            {"type": "integer", "minimum": 1},
            0,
            ["spec.f: Invalid value: 0: spec.f in body should be greater than or equal to 1"],
            id="minimum",
        ),
        pytest.param(
            {"type": "integer", "minimum": 1, "exclusiveMinimum": True},
            1,
            ["spec.f: Invalid value: 1: spec.f in body should be greater than 1"],
            id="exclusive-minimum",
        ),
        pytest.param(
            {"type": "number", "maximum": 1000000},
            1e7,
            ["spec.f: Invalid value: 1e+07: spec.f in body should be less than or equal to 1e+06"],
            id="maximum-float-go-format",
        ),
        pytest.param(
            {"type": "integer", "maximum": 5, "exclusiveMaximum": True},
            5,
            ["spec.f: Invalid value: 5: spec.f in body should be less than 5"],
            id="exclusive-maximum",
        ),
        pytest.param(
            {"type": "integer", "multipleOf": 5},
            7,
            ["spec.f: Invalid value: 7: spec.f in body should be a multiple of 5"],
            id="multiple-of",
        ),
        pytest.param(
            {"type": "integer", "format": "int32"}, 2**31, [], id="int32-format-not-enforced"
        ),
        pytest.param(
            {"type": "string", "minLength": 2},
            "a",
            ['spec.f: Invalid value: "a": spec.f in body should be at least 2 chars long'],
            id="min-length",
        ),
        pytest.param(
            {"type": "string", "maxLength": 2},
            "abc",
            ["spec.f: Too long: may not be more than 2 bytes"],
            id="max-length",
        ),
        pytest.param(
            {"type": "string", "maxLength": 2}, "éé", [], id="max-length-counts-code-points"
        ),
        pytest.param(
            {"type": "string", "pattern": "^[^#]+$"},
            "a#b",
            ["spec.f: Invalid value: \"a#b\": spec.f in body should match '^[^#]+$'"],
            id="pattern",
        ),
        pytest.param({"type": "string", "pattern": "b"}, "abc", [], id="pattern-is-unanchored"),
        pytest.param(
            {"type": "string", "enum": ["HTTP", "HTTPS"]},
            "ftp",
            ['spec.f: Unsupported value: "ftp": supported values: "HTTP", "HTTPS"'],
            id="enum",
        ),
        pytest.param(
            {"type": "integer", "enum": [1, 2]},
            3,
            ['spec.f: Unsupported value: 3: supported values: "1", "2"'],
            id="enum-numbers",
        ),
        pytest.param(
            {"type": "string", "format": "date-time"},
            "yesterday",
            [
                'spec.f: Invalid value: "yesterday": spec.f in body must be of type date-time: "yesterday"'
            ],
            id="format-date-time",
        ),
        pytest.param(
            {"type": "array", "minItems": 1, "items": {"type": "string"}},
            [],
            ["spec.f: Invalid value: 0: spec.f in body should have at least 1 items"],
            id="min-items",
        ),
        pytest.param(
            {"type": "array", "maxItems": 1, "items": {"type": "string"}},
            ["a", "b"],
            ["spec.f: Too many: 2: must have at most 1 item"],
            id="max-items",
        ),
        pytest.param(
            {"type": "object", "minProperties": 1},
            {},
            ["spec.f: Invalid value: 0: spec.f in body should have at least 1 properties"],
            id="min-properties",
        ),
        pytest.param(
            {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
            {"a": "1", "b": "2"},
            ["spec.f: Too many: 2: must have at most 1 item"],
            id="max-properties",
        ),
        pytest.param(
            {"type": "object", "additionalProperties": {"type": "string", "maxLength": 1}},
            {"k.io/x": "ab"},
            ["spec.f.k.io/x: Too long: may not be more than 1 byte"],
            id="map-key-path-uses-dots",
        ),
        pytest.param(
            {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}},
            {},
            ["spec.f.a: Required value"],
            id="required",
        ),
        pytest.param(
            {"x-kubernetes-int-or-string": True},
            True,
            [
                'spec.f: Invalid value: "boolean": spec.f in body must be of type integer,string: "boolean"'
            ],
            id="int-or-string",
        ),
        pytest.param(
            {"type": "array", "items": {"type": "integer"}},
            [1, "x"],
            [
                'spec.f[1]: Invalid value: "string": spec.f[1] in body must be of type integer: "string"'
            ],
            id="item-path",
        ),
        pytest.param(
            {"type": "array", "items": {"type": "string"}},
            [None],
            ['spec.f[0]: Invalid value: "null": spec.f[0] in body must be of type string: "null"'],
            id="null-item-is-a-type-error",
        ),
        pytest.param(
            {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            ["a", "b", "a", "a"],
            ['spec.f[2]: Duplicate value: "a"'],
            id="list-set-duplicate",
        ),
        pytest.param(
            {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["n"],
                "items": {
                    "type": "object",
                    "properties": {"n": {"type": "string"}, "v": {"type": "integer"}},
                },
            },
            [{"n": "a", "v": 1}, {"n": "a", "v": 2}],
            ['spec.f[1]: Duplicate value: {"n":"a"}'],
            id="list-map-duplicate-key",
        ),
    ],
)
def test_openapi_validation(field: dict[str, Any], value: Any, expected: list[str]) -> None:
    schema = schema_of({"type": "object", "properties": {"f": field}})
    _, errors = schema.admit(resource({"f": value}))
    assert messages(errors) == expected


def test_error_types_are_kubernetes_field_error_types() -> None:
    schema = schema_of(
        {
            "type": "object",
            "required": ["r"],
            "properties": {
                "r": {"type": "string"},
                "e": {"type": "string", "enum": ["A"]},
                "t": {"type": "integer"},
            },
        }
    )
    _, errors = schema.admit(resource({"e": "B", "t": "x"}))
    assert [(e.path, e.type) for e in errors] == [
        ("spec.e", "FieldValueNotSupported"),
        ("spec.t", "FieldValueTypeInvalid"),
        ("spec.r", "FieldValueRequired"),
    ]


# --- CEL rules -----------------------------------------------------------------------------


def rule_schema(rule: dict[str, Any], field: dict[str, Any] | None = None) -> StructuralSchema:
    f = field or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return schema_of(
        {"type": "object", "properties": {"f": {**f, "x-kubernetes-validations": [rule]}}}
    )


_OBJ = {
    "type": "object",
    "properties": {
        "a": {"type": "integer"},
        "b": {"type": "string"},
        "c-d": {"type": "string"},
        "m": {"type": "object", "additionalProperties": {"type": "string"}},
        "p": {"x-kubernetes-int-or-string": True},
        "l": {"type": "array", "items": {"type": "integer"}},
    },
}


@pytest.mark.parametrize(
    ("rule", "value", "expected"),
    [
        pytest.param({"rule": "self.a > 1"}, {"a": 2}, [], id="passes"),
        pytest.param(
            {"rule": "self.a > 1"},
            {"a": 1},
            ['spec.f: Invalid value: "object": failed rule: self.a > 1'],
            id="default-message",
        ),
        pytest.param(
            {"rule": "self.a > 1", "message": " too small "},
            {"a": 1},
            ['spec.f: Invalid value: "object": too small'],
            id="message-trimmed",
        ),
        pytest.param(
            {"rule": "self.a > 1", "messageExpression": "'got ' + string(self.a)"},
            {"a": 1},
            ['spec.f: Invalid value: "object": got 1'],
            id="message-expression",
        ),
        pytest.param(
            {"rule": "self.a > 1", "message": "m", "messageExpression": "self.a"},
            {"a": 1},
            ['spec.f: Invalid value: "object": m'],
            id="message-expression-not-string-falls-back",
        ),
        pytest.param(
            {"rule": "self.a > 1", "message": "m", "reason": "FieldValueForbidden"},
            {"a": 1},
            ["spec.f: Forbidden: m"],
            id="reason-forbidden",
        ),
        pytest.param(
            {
                "rule": "self.a > 1",
                "message": "m",
                "reason": "FieldValueRequired",
                "fieldPath": ".a",
            },
            {"a": 1},
            ["spec.f.a: Required value: m"],
            id="reason-required-field-path",
        ),
        pytest.param(
            {"rule": "self.a > 1", "message": "m", "fieldPath": ".m['k.x']"},
            {"a": 1},
            ['spec.f.m[k.x]: Invalid value: "object": m'],
            id="field-path-map-key",
        ),
        pytest.param(
            {"rule": "self.a > 1"},
            {"b": "x"},
            ['spec.f: Invalid value: "object": no such key: a evaluating rule: self.a > 1'],
            id="runtime-error-no-such-key",
        ),
        pytest.param(
            {"rule": "!has(self.a) || self.a > 1"}, {"b": "x"}, [], id="has-guards-absent-field"
        ),
        pytest.param(
            {"rule": "has(self.m.x)"},
            {},
            ['spec.f: Invalid value: "object": no such key: m evaluating rule: has(self.m.x)'],
            id="has-on-absent-parent-is-an-error",
        ),
        pytest.param({"rule": "has(self.m.x) || true"}, {}, [], id="error-or-true-is-true"),
        pytest.param({"rule": "has(self.m.k)"}, {"m": {"k": "v"}}, [], id="has-on-map-key"),
        pytest.param(
            {"rule": "self.m.all(k, k.startsWith('a'))"},
            {"m": {"ab": "1", "ba": "2"}},
            ["spec.f: Invalid value: \"object\": failed rule: self.m.all(k, k.startsWith('a'))"],
            id="all-iterates-map-keys",
        ),
        pytest.param(
            {"rule": "self.m.exists(k, self.m[k] == '2')"},
            {"m": {"ab": "1", "ba": "2"}},
            [],
            id="exists-over-map-keys",
        ),
        pytest.param({"rule": "size(self.b) == 2"}, {"b": "éé"}, [], id="size-counts-code-points"),
        pytest.param(
            {"rule": "self.b.matches('[0-9]')"}, {"b": "ab1cd"}, [], id="matches-is-unanchored"
        ),
        pytest.param(
            {"rule": "type(self.p) == int ? self.p > 0 : self.p.matches('^[a-z]+$')"},
            {"p": 8080},
            [],
            id="int-or-string-int",
        ),
        pytest.param(
            {"rule": "type(self.p) == int ? self.p > 0 : self.p.matches('^[a-z]+$')"},
            {"p": "http"},
            [],
            id="int-or-string-string",
        ),
        pytest.param(
            {"rule": "self.c__dash__d == 'x'"}, {"c-d": "x"}, [], id="escaped-property-name"
        ),
        pytest.param(
            {"rule": "self.b.lowerAscii().split('-').join('.') == 'a.b'"},
            {"b": "A-B"},
            [],
            id="kubernetes-string-library",
        ),
        pytest.param(
            {
                "rule": "self.l.isSorted() && self.l.sum() == 6 && self.l.max() == 3 && self.l.min() == 1"
            },
            {"l": [1, 2, 3]},
            [],
            id="kubernetes-list-library",
        ),
        pytest.param(
            {"rule": "self.l.all(x, !has(self.a) || self.l.exists_one(y, y == self.a))"},
            {"l": [1]},
            [],
            id="true-or-error-is-true",
        ),
        pytest.param(
            {"rule": "self.b + 1 == 2"},
            {"b": "x"},
            [
                "spec.f: Invalid value: \"object\": 'no such overload': call arguments did not match a "
                "supported operator, function or macro signature for rule: self.b + 1 == 2"
            ],
            id="runtime-no-such-overload",
        ),
    ],
)
def test_cel_rules(rule: dict[str, Any], value: Any, expected: list[str]) -> None:
    _, errors = rule_schema(rule, _OBJ).admit(resource({"f": value}))
    assert messages(errors) == expected


def test_rules_on_absent_fields_are_not_evaluated() -> None:
    _, errors = rule_schema({"rule": "false"}).admit(resource({}))
    assert errors == []


def test_root_rule_error_has_nil_path_and_sees_only_name_of_metadata() -> None:
    raw = {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name == 'a' && !has(self.metadata.labels)", "message": "m"}
        ],
    }
    schema = StructuralSchema.from_crd_version({"schema": {"openAPIV3Schema": raw}})
    meta: dict[str, Any] = {"name": "a", "labels": {"x": "y"}}
    obj = {"apiVersion": "x.io/v1", "kind": "X", "metadata": meta}
    assert schema.admit(obj)[1] == []
    meta["name"] = "b"
    assert messages(schema.admit(obj)[1]) == ['<nil>: Invalid value: "object": m']


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"s": "toolong", "f": 0},
            ["spec.s: Too long: may not be more than 2 bytes", NOT_CHECKED],
            id="blocking-error-skips-rules",
        ),
        pytest.param(
            {"s": "ok", "f": 0, "p": "ab"},
            [
                "spec.p: Invalid value: \"ab\": spec.p in body should match '^a$'",
                'spec.f: Invalid value: "integer": failed rule: self > 0',
            ],
            id="non-blocking-error-still-runs-rules",
        ),
    ],
)
def test_blocking_errors(spec: dict[str, Any], expected: list[str]) -> None:
    schema = schema_of(
        {
            "type": "object",
            "properties": {
                "s": {"type": "string", "maxLength": 2},
                "p": {"type": "string", "pattern": "^a$"},
                "f": {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 0"}]},
            },
        }
    )
    assert messages(schema.admit(resource(spec))[1]) == expected


# --- transition rules and ratcheting ---------------------------------------------------------

_IMMUTABLE = {"rule": "self == oldSelf", "message": "is immutable"}


@pytest.mark.parametrize(
    ("field", "old", "new", "expected"),
    [
        pytest.param(
            {"type": "string", "x-kubernetes-validations": [_IMMUTABLE]},
            None,
            "a",
            [],
            id="create-skips-transition-rule",
        ),
        pytest.param(
            {"type": "string", "x-kubernetes-validations": [_IMMUTABLE]},
            "a",
            "a",
            [],
            id="unchanged",
        ),
        pytest.param(
            {"type": "string", "x-kubernetes-validations": [_IMMUTABLE]},
            "a",
            "b",
            ['spec.f: Invalid value: "string": is immutable'],
            id="changed",
        ),
        pytest.param(
            {"type": "string", "x-kubernetes-validations": [_IMMUTABLE]},
            "__absent__",
            "b",
            [],
            id="field-added-on-update-has-no-old-value",
        ),
        pytest.param(
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"v": {"type": "string"}},
                    "x-kubernetes-validations": [_IMMUTABLE],
                },
            },
            [{"v": "a"}],
            [{"v": "b"}],
            [],
            id="atomic-list-items-do-not-correlate",
        ),
        pytest.param(
            {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["k"],
                "items": {
                    "type": "object",
                    "required": ["k"],
                    "properties": {"k": {"type": "string"}, "v": {"type": "string"}},
                    "x-kubernetes-validations": [_IMMUTABLE],
                },
            },
            [{"k": "x", "v": "a"}, {"k": "y", "v": "a"}],
            [{"k": "y", "v": "b"}, {"k": "x", "v": "a"}],
            ['spec.f[0]: Invalid value: "object": is immutable'],
            id="list-map-items-correlate-by-key",
        ),
        pytest.param(
            {
                "type": "object",
                "x-kubernetes-map-type": "atomic",
                "properties": {"v": {"type": "string", "x-kubernetes-validations": [_IMMUTABLE]}},
            },
            {"v": "a"},
            {"v": "b"},
            # MapIsCorrelatable is true for atomic maps too: the transition rule runs.
            ['spec.f.v: Invalid value: "string": is immutable'],
            id="atomic-map-correlates-too",
        ),
        pytest.param(
            {"type": "string", "maxLength": 1},
            "abc",
            "abc",
            [],
            id="ratchet-unchanged-invalid-value",
        ),
        pytest.param(
            {"type": "string", "maxLength": 1},
            "abc",
            "abcd",
            ["spec.f: Too long: may not be more than 1 byte"],
            id="no-ratchet-when-changed",
        ),
        pytest.param(
            {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 2"}]},
            "abc",
            "abc",
            [],
            id="ratchet-unchanged-cel-rule",
        ),
    ],
)
def test_transition_rules_and_ratcheting(
    field: dict[str, Any], old: Any, new: Any, expected: list[str]
) -> None:
    schema = schema_of({"type": "object", "properties": {"f": field, "other": {"type": "integer"}}})
    old_spec: dict[str, Any] = {"other": 1} if old == "__absent__" else {"f": old}
    old_obj = resource(old_spec) if old is not None else None
    _, errors = schema.admit(resource({"f": new, "other": 2}), old=old_obj)
    assert messages(errors) == expected


_OPTIONAL_IMMUTABLE = {
    "rule": "!oldSelf.hasValue() || self == oldSelf.value()",
    "message": "is immutable",
    "optionalOldSelf": True,
}


@pytest.mark.parametrize(
    ("field", "old", "new", "expected"),
    [
        pytest.param(
            {
                "type": "array",
                "x-kubernetes-list-type": "set",
                "items": {"type": "string"},
                "x-kubernetes-validations": [_IMMUTABLE],
            },
            ["a", "b"],
            ["b", "a"],
            [],
            id="set-list-equality-ignores-order",
        ),
        pytest.param(
            {
                "type": "array",
                "items": {"type": "string"},
                "x-kubernetes-validations": [_IMMUTABLE],
            },
            ["a", "b"],
            ["b", "a"],
            ['spec.f: Invalid value: "array": is immutable'],
            id="atomic-list-equality-is-ordered",
        ),
        pytest.param(
            {"type": "string", "x-kubernetes-validations": [_OPTIONAL_IMMUTABLE]},
            None,
            "a",
            [],
            id="optional-old-self-on-create",
        ),
        pytest.param(
            {"type": "string", "x-kubernetes-validations": [_OPTIONAL_IMMUTABLE]},
            "a",
            "b",
            ['spec.f: Invalid value: "string": is immutable'],
            id="optional-old-self-on-update",
        ),
    ],
)
def test_list_equality_and_optional_old_self(
    field: dict[str, Any], old: Any, new: Any, expected: list[str]
) -> None:
    schema = schema_of({"type": "object", "properties": {"f": field}})
    old_obj = resource({"f": old}) if old is not None else None
    _, errors = schema.admit(resource({"f": new}), old=old_obj)
    assert messages(errors) == expected


# --- Status message -------------------------------------------------------------------------


def test_status_message_and_causes() -> None:
    one = FieldError.required("spec.a")
    two = FieldError.invalid("spec.b", 0, "spec.b in body should be greater than or equal to 1")
    assert invalid_status_message("PodProbeMarker", "probemarker.io", "x", [one]) == (
        'PodProbeMarker.probemarker.io "x" is invalid: spec.a: Required value'
    )
    assert invalid_status_message("PodProbeMarker", "probemarker.io", "x", [one, two, one]) == (
        'PodProbeMarker.probemarker.io "x" is invalid: [spec.a: Required value, spec.b: Invalid value: 0: '
        "spec.b in body should be greater than or equal to 1]"
    )
    assert status_causes([one, two]) == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.a"},
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 0: spec.b in body should be greater than or equal to 1",
            "field": "spec.b",
        },
    ]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(1.0, "1", id="integral"),
        pytest.param(0.5, "0.5", id="fraction"),
        pytest.param(123456.0, "123456", id="below-exponent"),
        pytest.param(1e6, "1e+06", id="exponent"),
        pytest.param(2.0**64, "1.8446744073709552e+19", id="big"),
        pytest.param(1e-5, "1e-05", id="small"),
    ],
)
def test_go_float(value: float, text: str) -> None:
    assert go_float(value) == text


def test_go_quote() -> None:
    assert go_quote('a"b\n\x01é') == '"a\\"b\\n\\x01é"'


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        pytest.param({"name": "ok", "namespace": "default"}, [], id="valid"),
        pytest.param(
            {"namespace": "default"},
            ["metadata.name: Required value: name or generateName is required"],
            id="name-missing",
        ),
        pytest.param(
            {"name": "Bad_Name", "namespace": "default"},
            [
                'metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of '
                "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                "character (e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ],
            id="name-invalid",
        ),
        pytest.param({"name": "a"}, ["metadata.namespace: Required value"], id="namespace-missing"),
    ],
)
def test_object_meta(meta: dict[str, Any], expected: list[str]) -> None:
    schema = schema_of({"type": "object"})
    obj = {"apiVersion": "x.io/v1", "kind": "X", "metadata": meta, "spec": {}}
    assert messages(schema.admit(obj, namespaced=True)[1]) == expected


# --- CRD checks ----------------------------------------------------------------------------


def crd(schema: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.x.io"},
        "spec": {
            "group": "x.io",
            "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
            **spec,
        },
    }


# One version: the conversion to the internal form moves its schema to spec.validation.
_ROOT = "spec.validation.openAPIV3Schema"


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        pytest.param(
            {"type": "object", "properties": {"spec": {"type": "object"}}}, [], id="valid"
        ),
        pytest.param(
            {"type": "object", "properties": {"spec": {"properties": {}}}},
            [
                f"{_ROOT}.properties[spec].type: Required value: must not be empty for specified object fields"
            ],
            id="type-missing",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {
                    "s": {"type": "string", "x-kubernetes-validations": [{"rule": "self ==="}]}
                },
            },
            [
                f"{_ROOT}.properties[s].x-kubernetes-validations[0].rule: Invalid value: "
                'apiextensions.ValidationRule{Rule:"self ===", Message:"", MessageExpression:"", '
                'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", '
                "OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:"
            ],
            id="rule-does-not-compile",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {
                    "s": {
                        "type": "object",
                        "properties": {
                            "a": {"type": "string"},
                            "m": {"type": "object", "additionalProperties": {"type": "string"}},
                        },
                        "x-kubernetes-validations": [
                            {"rule": "self.a == 'x' && self.m.any == 'y' && has(self.b)"}
                        ],
                    }
                },
            },
            ["undefined field 'b'"],
            id="rule-selects-undeclared-field",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {
                    "l": {
                        "type": "array",
                        "maxItems": 10,
                        "items": {
                            "type": "string",
                            "maxLength": 10,
                            "x-kubernetes-validations": [{"rule": "self == oldSelf"}],
                        },
                    }
                },
            },
            # The value is the rule; the path is the list's (withForbidOldSelfValidations).
            [
                f'{_ROOT}.properties[l].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": '
                f"oldSelf cannot be used on the uncorrelatable portion of the schema within "
                f"{_ROOT}.properties[l]"
            ],
            id="old-self-on-uncorrelatable-items",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {"n": {"type": "integer", "minimum": 1, "default": 0}},
            },
            [
                f"{_ROOT}.properties[n].default: Invalid value: 0:  in body should be greater than or equal to 1"
            ],
            id="default-invalid",
        ),
        pytest.param(
            {
                "type": "object",
                "properties": {
                    "s": {
                        "type": "object",
                        "x-kubernetes-validations": [{"rule": "true", "fieldPath": ".nope"}],
                    }
                },
            },
            [
                f'{_ROOT}.properties[s].x-kubernetes-validations[0].fieldPath: Invalid value: ".nope": '
                "fieldPath must be a valid path"
            ],
            id="field-path-invalid",
        ),
    ],
)
def test_validate_crd(schema: dict[str, Any], expected: list[str]) -> None:
    got = messages(validate_crd(crd(schema)))
    assert len(got) == len(expected), got
    for message, want in zip(got, expected, strict=True):
        assert want in message


def test_validate_crd_names() -> None:
    bad = crd({"type": "object"}, group="nodot")
    bad["metadata"]["name"] = "things.other.io"
    assert messages(validate_crd(bad)) == [
        'metadata.name: Invalid value: "things.other.io": must be spec.names.plural+"."+spec.group',
        'spec.group: Invalid value: "nodot": should be a domain with at least one dot',
    ]


# --- the project's own CRD -------------------------------------------------------------------

_CRD = (
    Path(__file__).resolve().parents[2]
    / "manifests"
    / "crd"
    / "podprobemarkers.probemarker.io.yaml"
)


@pytest.mark.skipif(not _CRD.exists(), reason="project CRD not present")
def test_project_crd_is_accepted_and_refuses_an_invalid_marker() -> None:
    document = yaml.safe_load(_CRD.read_text())
    assert validate_crd(document) == []
    schema = StructuralSchema.from_crd_version(document["spec"]["versions"][0])
    marker = {
        "apiVersion": "probemarker.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {"name": "m", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "probes": [
                {
                    "name": "p",
                    "containerName": "main",
                    "podConditionType": "Ready",
                    "probe": {"tcpSocket": {"port": 80}},
                }
            ],
        },
    }
    admitted, errors = schema.admit(marker)
    assert admitted["spec"]["probes"][0]["probe"]["periodSeconds"] == 10
    assert [e.path for e in errors] == ["spec.probes[0].podConditionType"]
