"""CRD admission as kube-apiserver 1.32 has it (apiextensions validation): one small CRD per
case, the exact field errors the API server reports for it, in its order.

Every expected message below was derived from the apiextensions-apiserver, apimachinery
and apiserver sources of kubernetes-1.32.0 (the functions are named per group); the cases
marked "observed" were also seen on real 1.28 and 1.32 servers.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from probemarker.sim.crd.validation import crdtypes
from probemarker.sim.crd.validation.definition import CrdDecodeError, validate_crd

S = "spec.validation.openAPIV3Schema"
TYPES = '"array", "boolean", "integer", "number", "object", "string"'
DNS1035 = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    r"used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
METADATA_ONLY = (
    f"{S}.properties[metadata]: Forbidden: must not specify anything other than name and "
    "generateName, but metadata is implicitly specified"
)
NIL_RULE = (
    'Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), '
    'FieldPath:"", OptionalOldSelf:(*bool)(nil)}'
)


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def crd(
    schema: dict[str, Any] | None, version: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    """A one-version CRD `things.x.io` with `schema`; `version` and `spec` override fields."""
    entry: dict[str, Any] = {"name": "v1", "served": True, "storage": True}
    if schema is not None:
        entry["schema"] = {"openAPIV3Schema": schema}
    entry.update(version or {})
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.x.io"},
        "spec": {
            "group": "x.io",
            "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": [entry],
        },
    }
    body["spec"].update(spec)
    return body


def ruled(schema: dict[str, Any], *rules: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "x-kubernetes-validations": list(rules)}


def with_name(body: dict[str, Any], **names: Any) -> dict[str, Any]:
    body = copy.deepcopy(body)
    body["spec"]["names"].update(names)
    return body


def messages(body: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [error.message for error in validate_crd(body, old=old)]


# --- the metadata restriction (validateStructuralMetadataInvariants) ----------------------

METADATA = [
    pytest.param(obj(metadata={"type": "object", "description": "x"}), [METADATA_ONLY], id="description-observed"),
    pytest.param(obj(metadata={"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}}), [], id="name-only"),
    pytest.param(obj(metadata={"type": "object", "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}}}), [], id="name-and-generateName"),
    pytest.param(obj(metadata={"type": "object", "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}}}), [METADATA_ONLY], id="another-property"),
    pytest.param(obj(metadata={"type": "object", "required": []}), [METADATA_ONLY], id="empty-required-is-set"),
    pytest.param(obj(metadata={"type": "object", "properties": {}, "enum": []}), [], id="empty-properties-and-enum-are-unset"),
    pytest.param(obj(metadata={"type": "object", "example": {"name": "x"}}), [], id="example-is-not-structural"),
    pytest.param(obj(metadata={"type": "string"}), [f'{S}.properties[metadata].type: Invalid value: "string": must be object'], id="not-an-object"),
    pytest.param(obj(metadata={"type": "object", "default": {}}), [f"{S}.properties[metadata].default: Forbidden: must not be set in top-level metadata"], id="default"),
    pytest.param(obj(kind={"type": "string", "default": "X"}), [f"{S}.properties[kind].default: Forbidden: must not be set in top-level kind"], id="default-on-kind"),
    pytest.param(obj(kind={"type": "integer"}), [f'{S}.properties[kind].type: Invalid value: "integer": must be string'], id="kind-not-a-string"),
    pytest.param(obj(spec=obj(metadata={"type": "object", "description": "nested metadata is a field"})), [], id="nested-metadata-property"),
    pytest.param(
        ruled(obj(metadata={"type": "object", "description": "x"}, n={"type": "integer"}), {"rule": "self ==="}),
        [METADATA_ONLY],
        id="suppresses-cel-errors",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "expected"), METADATA)
def test_metadata_restriction(schema: dict[str, Any], expected: list[str]) -> None:
    assert messages(crd(schema)) == expected


# --- where schema errors are reported (v1 -> internal conversion) -------------------------


def two_versions(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    body = crd(first)
    body["spec"]["versions"].append(
        {"name": "v2", "served": True, "storage": False, "schema": {"openAPIV3Schema": second}}
    )
    return body


BAD = obj(a={"type": "array"})


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(crd(BAD), [f"{S}.properties[a].items: Required value: must be specified"], id="one-version"),
        pytest.param(two_versions(BAD, copy.deepcopy(BAD)), [f"{S}.properties[a].items: Required value: must be specified"], id="same-schemas"),
        pytest.param(
            two_versions(obj(), BAD),
            ["spec.versions[1].schema.openAPIV3Schema.properties[a].items: Required value: must be specified"],
            id="different-schemas",
        ),
        pytest.param(
            two_versions(obj(a={"type": "string", "description": ""}), obj(a={"type": "string"})),
            [],
            id="zero-values-compare-equal",
        ),
        pytest.param(crd(None), ["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"], id="no-schema"),
        pytest.param(
            crd(obj(), {"additionalPrinterColumns": [{"name": "x", "type": "str", "jsonPath": "spec.x"}]}),
            [
                'spec.additionalPrinterColumns[0].type: Invalid value: "str": must be one of boolean,date,integer,number,string',
                'spec.additionalPrinterColumns[0].JSONPath: Invalid value: "spec.x": must be a simple json path starting with .',
            ],
            id="columns-move-too",
        ),
    ],
)  # fmt: skip
def test_error_paths_follow_the_internal_form(body: dict[str, Any], expected: list[str]) -> None:
    assert messages(body) == expected


# --- ValidateStructural -------------------------------------------------------------------

STRUCTURAL = [
    pytest.param(obj(a={"properties": {}}), [f"{S}.properties[a].type: Required value: must not be empty for specified object fields"], id="untyped-field"),
    pytest.param(obj(a={"type": "array", "items": {}}), [f"{S}.properties[a].items.type: Required value: must not be empty for specified array items"], id="untyped-items"),
    pytest.param({"properties": {}}, [f"{S}.type: Required value: must not be empty at the root"], id="untyped-root"),
    pytest.param({"type": "object", "additionalProperties": False}, [f"{S}.additionalProperties: Forbidden: must not be used at the root"], id="additional-properties-at-root"),
    pytest.param(obj(a={"type": "object", "additionalProperties": False}), [], id="additional-properties-false-below"),
    pytest.param(obj(a={"type": "string", "allOf": [{"type": "string"}]}), [f"{S}.properties[a].allOf[0].type: Forbidden: must be empty to be structural"], id="type-in-allOf"),
    pytest.param(obj(a={"type": "string", "anyOf": [{"description": "d"}]}), [f"{S}.properties[a].anyOf[0].description: Forbidden: must be empty to be structural"], id="description-in-anyOf"),
    pytest.param(obj(a={"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}), [], id="int-or-string-anyOf"),
    pytest.param(obj(a={"x-kubernetes-int-or-string": True, "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"maxLength": 3}]}), [], id="int-or-string-allOf"),
    pytest.param(
        obj(a={"x-kubernetes-int-or-string": True, "x-kubernetes-preserve-unknown-fields": True}),
        [f"{S}.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"],
        id="int-or-string-preserving",
    ),
    pytest.param(
        {"type": "object", "properties": {"a": {"type": "string"}}, "allOf": [{"properties": {"b": {"maxLength": 1}}}]},
        [f"{S}.properties[b]: Required value: because it is defined in {S}.allOf[0].properties[b]"],
        id="completeness-at-root",
    ),
    pytest.param(
        obj(e={"type": "object", "x-kubernetes-embedded-resource": True}),
        [f"{S}.properties[e].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"],
        id="embedded-without-properties",
    ),
    pytest.param(
        obj(a={"type": "string", "pattern": "("}),
        [f'{S}.properties[a].pattern: Invalid value: "(": must be a valid regular expression, but isn\'t: error parsing regexp: missing closing ): `(`'],
        id="pattern",
    ),
    pytest.param(
        obj(z={"type": "array"}, a={"properties": {}}),
        [
            f"{S}.properties[a].type: Required value: must not be empty for specified object fields",
            f"{S}.properties[z].items: Required value: must be specified",
        ],
        id="sorted-by-message",
    ),
    pytest.param(
        ruled(obj(a={"type": "array"}), {"rule": "self ==="}),
        [f"{S}.properties[a].items: Required value: must be specified"],
        id="suppresses-cel-errors",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "expected"), STRUCTURAL)
def test_structural_schema(schema: dict[str, Any], expected: list[str]) -> None:
    assert messages(crd(schema)) == expected


# --- per-node schema checks (ValidateCustomResourceDefinitionOpenAPISchema) ---------------

KEYWORDS = [
    pytest.param(
        obj(a={"type": "null"}),
        [f'{S}.properties[a].type: Unsupported value: "null": supported values: {TYPES}',
         f"{S}.properties[a].type: Forbidden: type cannot be set to null, use nullable as an alternative"],
        id="type-null",
    ),
    pytest.param(obj(a={"$ref": "#/x"}), [f"{S}.properties[a].$ref: Forbidden: $ref is not supported"], id="ref"),
    pytest.param(obj(a={"type": "string", "$schema": "x"}), [f"{S}: Invalid value: \"\": OpenAPIV3Schema 'schema' is not supported"], id="schema-keyword"),
    pytest.param(
        obj(a={"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        [f"{S}.properties[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"],
        id="unique-items",
    ),
    pytest.param(
        obj(a={"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": False}),
        [f"{S}.properties[a].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"],
        id="properties-and-additional-properties",
    ),
    pytest.param(obj(a={"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": True}), [], id="additional-properties-true"),
    pytest.param(
        obj(a={"type": "string", "x-kubernetes-preserve-unknown-fields": False}),
        [f"{S}.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"],
        id="preserve-false",
    ),
    pytest.param({**obj(), "nullable": True}, [f"{S}.nullable: Forbidden: nullable cannot be true at the root"], id="nullable-root"),
    pytest.param(
        obj(m={"type": "object", "additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "sorted"}),
        [f'{S}.properties[m].x-kubernetes-map-type: Unsupported value: "sorted": supported values: "atomic", "granular"'],
        id="map-type",
    ),
    pytest.param(
        obj(m={"type": "string", "x-kubernetes-map-type": "atomic"}),
        [f'{S}.properties[m].type: Invalid value: "string": must be object if x-kubernetes-map-type is specified'],
        id="map-type-on-a-string",
    ),
    pytest.param(
        obj(e={"type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True},
            metadata={"type": "object", "properties": {"name": {"type": "string"}}}),
        [],
        id="embedded-resource",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "expected"), KEYWORDS)
def test_schema_keywords(schema: dict[str, Any], expected: list[str]) -> None:
    assert messages(crd(schema)) == expected


def test_status_subresource_restricts_the_root() -> None:
    status = {"subresources": {"status": {}}}
    assert messages(crd({"type": "array", "items": {"type": "string"}}, status)) == [
        f'{S}.type: Invalid value: "array": only "object" is allowed as the type at the root of the schema if the status subresource is enabled',
        f'{S}.type: Invalid value: "array": must be object at the root',
    ]
    (only,) = messages(crd({**obj(), "maxProperties": 5}, status))
    assert only.startswith(
        f'{S}: Invalid value: apiextensions.JSONSchemaProps{{ID:"", Schema:"", Ref:(*string)(nil), '
    )
    assert "MaxProperties:(*int64)(0xc000000000)" in only
    assert only.endswith(
        "only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum "
        "MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items "
        "Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at "
        "the root of the schema if the status subresource is enabled"
    )


# --- list and map types -------------------------------------------------------------------


def listed(**schema: Any) -> dict[str, Any]:
    return obj(
        l={
            "type": "array",
            "items": {"type": "object", "properties": {"k": {"type": "string"}}},
            **schema,
        }
    )


LIST_TYPES = [
    pytest.param(listed(**{"x-kubernetes-list-type": "map"}), [f"{S}.properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"], id="map-without-keys"),
    pytest.param(
        listed(**{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"]}),
        [f"{S}.properties[l].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"],
        id="map-key-optional",
    ),
    pytest.param(
        listed(**{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["z"]}),
        [f'{S}.properties[l].x-kubernetes-list-map-keys: Invalid value: []string{{"z"}}: entries must all be names of item properties'],
        id="map-key-unknown",
    ),
    pytest.param(
        obj(l={"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
               "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "object"}}}}),
        [f'{S}.properties[l].items.properties[k].type: Invalid value: "object": must be a scalar type if parent array\'s x-kubernetes-list-type is map'],
        id="map-key-not-scalar",
    ),
    pytest.param(
        listed(**{"x-kubernetes-list-type": "set"}),
        [f"{S}.properties[l].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set"],
        id="set-of-granular-objects",
    ),
    pytest.param(
        obj(l={"type": "object", "x-kubernetes-list-type": "set"}),
        [f'{S}.properties[l].type: Invalid value: "object": must be array if x-kubernetes-list-type is specified'],
        id="list-type-on-an-object",
    ),
    pytest.param(
        obj(l={"type": "array", "items": {"type": "string", "nullable": True}, "x-kubernetes-list-type": "set"}),
        [f"{S}.properties[l].items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is set"],
        id="nullable-set-items",
    ),
    pytest.param(
        ruled(
            obj(a={"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"},
                b=ruled({"type": "string"}, {"rule": "self ==="})),
            {"rule": "self ==="},
        ),
        [
            f'{S}.properties[a].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map"',
            # a sibling's CEL errors stay; the root's rule (above the list) is not compiled
            f"{S}.properties[b].x-kubernetes-validations[0].rule: Invalid value: "
            f'apiextensions.ValidationRule{{Rule:"self ===", {NIL_RULE}: compilation failed: '
            "ERROR: <input>:1:8: Syntax error: token recognition error at: '='\n | self ===\n | .......^",
        ],
        id="suppresses-cel-above-only",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "expected"), LIST_TYPES)
def test_list_types(schema: dict[str, Any], expected: list[str]) -> None:
    assert messages(crd(schema)) == expected


# --- x-kubernetes-validations fields -------------------------------------------------------

R = f"{S}.properties[s].x-kubernetes-validations[0]"


def rule_schema(**rule: Any) -> dict[str, Any]:
    return obj(s=ruled({"type": "object", "properties": {"a": {"type": "string"}}}, rule))


RULE_FIELDS = [
    pytest.param({"rule": " "}, [f"{R}.rule: Required value: rule is not specified"], id="rule-blank"),
    pytest.param({"rule": "true", "message": "  "}, [f'{R}.message: Invalid value: "  ": message must be non-empty if specified'], id="message-blank"),
    pytest.param({"rule": "true", "message": "a\nb"}, [f'{R}.message: Invalid value: "a\\nb": message must not contain line breaks'], id="message-newline"),
    pytest.param({"rule": "true ||\nfalse"}, [f"{R}.message: Required value: message must be specified if rule contains line breaks"], id="multiline-rule"),
    pytest.param({"rule": "true", "messageExpression": " "}, [f"{R}.messageExpression: Required value: messageExpression must be non-empty if specified"], id="message-expression-blank"),
    pytest.param(
        {"rule": "true", "reason": "Bogus"},
        [f'{R}.reason: Unsupported value: "Bogus": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"'],
        id="reason",
    ),
    pytest.param({"rule": "true", "fieldPath": ".b"}, [f'{R}.fieldPath: Invalid value: ".b": fieldPath must be a valid path'], id="field-path-unknown"),
    pytest.param({"rule": "true", "fieldPath": "['a']"}, [], id="field-path-bracket"),
    pytest.param(
        {"rule": "true", "fieldPath": " "},
        [f'{R}.fieldPath: Invalid value: " ": fieldPath must be non-empty if specified',
         f'{R}.fieldPath: Invalid value: " ": fieldPath must be a valid path'],
        id="field-path-blank",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("rule", "expected"), RULE_FIELDS)
def test_rule_fields(rule: dict[str, Any], expected: list[str]) -> None:
    assert messages(crd(rule_schema(**rule))) == expected


# --- defaults (ValidateDefaults) ------------------------------------------------------------

DEFAULTS = [
    pytest.param(
        obj(o={"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": "x", "b": 1}}),
        [f'{S}.properties[o].default: Invalid value: map[string]interface {{}}{{"a":"x", "b":1}}: must not have unknown fields'],
        id="not-pruned",
    ),
    pytest.param(obj(n={"type": "integer", "minimum": 1, "default": 0}), [f"{S}.properties[n].default: Invalid value: 0:  in body should be greater than or equal to 1"], id="invalid"),
    pytest.param(
        obj(n=ruled({"type": "integer", "default": 0}, {"rule": "self > 0", "message": "positive"})),
        [f'{S}.properties[n].default: Invalid value: "integer": positive'],
        id="fails-a-rule",
    ),
    pytest.param(obj(m={"type": "object", "additionalProperties": {"type": "integer", "minimum": 1, "default": 0}}), [], id="additional-properties-not-followed"),
    pytest.param(
        ruled(obj(n={"type": "integer", "minimum": 1, "default": 0}), {"rule": "self ==="}),
        [f"{S}.properties[n].default: Invalid value: 0:  in body should be greater than or equal to 1"],
        id="suppresses-cel-errors",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "expected"), DEFAULTS)
def test_defaults(schema: dict[str, Any], expected: list[str]) -> None:
    assert messages(crd(schema)) == expected


def test_defaults_need_preserve_unknown_fields_false() -> None:
    body = crd(obj(n={"type": "integer", "default": 1}), preserveUnknownFields=True)
    detail = "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"
    assert messages(body) == [
        "spec.preserveUnknownFields: Invalid value: true: must be false in order to use defaults in the schema",
        f"spec.preserveUnknownFields: Invalid value: true: {detail}",
    ]


# --- the rest of the CRD ------------------------------------------------------------------

BASE = crd(obj())


def changed(path: str, value: Any) -> dict[str, Any]:
    body = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    target = body
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    if value is None:
        del target[last]
    else:
        target[last] = value
    return body


SPEC = [
    pytest.param(changed("metadata.name", "thing.x.io"), ['metadata.name: Invalid value: "thing.x.io": must be spec.names.plural+"."+spec.group'], id="name"),
    pytest.param(changed("metadata.name", None), ["metadata.name: Required value: name or generateName is required"], id="no-name"),
    pytest.param(
        changed("metadata.name", None) | {"metadata": {"generateName": "things-"}},
        ['metadata.generateName: Invalid value: "things-": must be spec.names.plural+"."+spec.group',
         "metadata.name: Required value: name or generateName is required"],
        id="generate-name",
    ),
    pytest.param(changed("metadata.name", "Things.x.io") | {"spec": with_name(BASE, plural="Things")["spec"]},
                 [f'metadata.name: Invalid value: "Things.x.io": {SUBDOMAIN}',
                  f'spec.names.plural: Invalid value: "Things": {DNS1035}'], id="name-not-a-subdomain"),
    pytest.param(changed("metadata.namespace", "default"), ["metadata.namespace: Forbidden: not allowed on this type"], id="namespace"),
    pytest.param(changed("spec.group", "io"), ['metadata.name: Invalid value: "things.x.io": must be spec.names.plural+"."+spec.group',
                                              'spec.group: Invalid value: "io": should be a domain with at least one dot'], id="group"),
    pytest.param(changed("spec.scope", None), ["spec.scope: Required value"], id="scope-missing"),
    pytest.param(changed("spec.scope", "Global"), ['spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"'], id="scope"),
    pytest.param(with_name(BASE, plural="Things"), ['metadata.name: Invalid value: "things.x.io": must be spec.names.plural+"."+spec.group',
                                                  f'spec.names.plural: Invalid value: "Things": {DNS1035}'], id="plural"),
    pytest.param(with_name(BASE, kind="Thing_"), [f'spec.names.kind: Invalid value: "Thing_": may have mixed case, but should otherwise match: {DNS1035}',
                                                f'spec.names.listKind: Invalid value: "Thing_List": may have mixed case, but should otherwise match: {DNS1035}'], id="kind"),
    pytest.param(with_name(BASE, listKind="Thing"), ['spec.names.listKind: Invalid value: "Thing": kind and listKind may not be the same'], id="list-kind"),
    pytest.param(with_name(BASE, shortNames=["t", "T"]), [f'spec.names.shortNames[1]: Invalid value: "T": {DNS1035}'], id="short-names"),
    # listKind is defaulted from kind only when kind is set
    pytest.param(with_name(BASE, kind=""), ["spec.names.kind: Required value", "spec.names.listKind: Required value"], id="no-kind"),
    pytest.param(changed("spec.versions.0.name", "V1"), [f'spec.versions[0].name: Invalid value: "V1": {DNS1035}',
                                                        f'spec.version: Invalid value: "V1": {DNS1035}'], id="version-name"),
    pytest.param(changed("spec.versions.0.deprecationWarning", "old"), ['spec.versions[0].deprecationWarning: Invalid value: "old": can only be set for deprecated versions'], id="deprecation-warning"),
    pytest.param(
        changed("spec.versions.0.subresources", {"scale": {"specReplicasPath": ".status.r", "statusReplicasPath": ""}}),
        ['spec.subresources.scale.specReplicasPath: Invalid value: ".status.r": should be a json path under .spec',
         "spec.subresources.scale.statusReplicasPath: Required value"],
        id="scale",
    ),
    pytest.param(
        changed("spec.conversion", {"strategy": "Webhook"}),
        ["spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
         "spec.conversion.conversionReviewVersions: Required value"],
        id="webhook-conversion",
    ),
    pytest.param(
        changed("spec.conversion", {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v2"],
                "clientConfig": {"service": {"name": "c", "namespace": "n", "path": "/a//b"}}}}),
        ['spec.conversion.webhookClientConfig.service.path: Invalid value: "/a//b": segment[1] may not be empty',
         'spec.conversion.conversionReviewVersions: Invalid value: []string{"v2"}: must include at least one of v1, v1beta1'],
        id="webhook-service",
    ),
    pytest.param(changed("spec.conversion", {"strategy": "None", "webhook": {"conversionReviewVersions": ["v1"]}}),
                 ["spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook"], id="webhook-with-none"),
    pytest.param(
        crd(obj(a={"type": "object"}, b={"type": "string"}),
            {"selectableFields": [{"jsonPath": ".a"}, {"jsonPath": ".b"}, {"jsonPath": ".b"}, {"jsonPath": "b"}]}),
        ['spec.selectableFields[0].jsonPath: Invalid value: ".a": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.',
         'spec.selectableFields[2].jsonPath: Duplicate value: ".b"',
         'spec.selectableFields[3].jsonPath: Invalid value: "b": is an invalid path: expected [ or . but got: b'],
        id="selectable-fields",
    ),
    pytest.param(
        changed("spec.group", "x.k8s.io") | {"metadata": {"name": "things.x.k8s.io"}},
        ['metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111'],
        id="protected-group",
    ),
    pytest.param(
        changed("spec.group", "x.k8s.io") | {"metadata": {"name": "things.x.k8s.io", "annotations": {"api-approved.kubernetes.io": "unapproved, testing"}}},
        [],
        id="protected-group-unapproved",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("body", "expected"), SPEC)
def test_spec(body: dict[str, Any], expected: list[str]) -> None:
    assert messages(body) == expected


def test_storage_versions() -> None:
    none = changed("spec.versions.0.storage", False)
    got = messages(none)
    assert len(got) == 2
    assert got[0].startswith(
        "spec.versions: Invalid value: []apiextensions.CustomResourceDefinitionVersion{"
        'apiextensions.CustomResourceDefinitionVersion{Name:"v1", Served:true, Storage:false, '
        "Deprecated:false, DeprecationWarning:(*string)(nil), "
        "Schema:(*apiextensions.CustomResourceValidation)(nil), "
    )
    assert got[0].endswith("}}: must have exactly one version marked as storage version")
    assert (
        got[1]
        == "status.storedVersions: Invalid value: []string(nil): must have at least one stored version"
    )
    twice = copy.deepcopy(BASE)
    twice["spec"]["versions"].append(copy.deepcopy(twice["spec"]["versions"][0]))
    details = [m.rsplit(": ", 1)[1] for m in messages(twice)]
    assert details == [
        "must contain unique version names",
        "must have exactly one version marked as storage version",
        "must have the storage version v1",
    ]


# --- updates ------------------------------------------------------------------------------


def stored(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as the sim stores it, established."""
    out = copy.deepcopy(body)
    out["status"] = {
        "conditions": [{"type": "Established", "status": "True"}],
        "storedVersions": ["v1"],
    }
    return out


def test_update_immutable_fields() -> None:
    old = stored(BASE)
    assert messages(changed("spec.scope", "Cluster"), old=old) == [
        'spec.scope: Invalid value: "Cluster": field is immutable'
    ]
    renamed = with_name(BASE, kind="Other")
    assert messages(renamed, old=old) == [
        'spec.names.kind: Invalid value: "Other": field is immutable'
    ]
    old["status"]["conditions"] = []
    assert messages(renamed, old=old) == []


def test_update_keeps_stored_versions() -> None:
    old = stored(BASE)
    old["status"]["storedVersions"] = ["v0", "v1"]
    assert messages(BASE, old=old) == [
        'status.storedVersions[0]: Invalid value: "v0": must appear in spec.versions'
    ]


def test_update_ignores_the_per_rule_cost_of_an_unchanged_schema() -> None:
    costly = obj(l={"type": "array", "maxItems": 5000, "items": ruled(
        {"type": "string", "maxLength": 10000}, {"rule": "self.matches('^a+$') && self.contains('b')"})})  # fmt: skip
    got = messages(crd(costly))
    assert got == [
        f"{S}.properties[l].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost "
        "exceeds budget by factor of 4.0x (try simplifying the rule, or adding maxItems, "
        "maxProperties, and maxLength where arrays, maps, and strings are declared)"
    ]
    assert messages(crd(costly), old=stored(crd(costly))) == []
    changed_schema = copy.deepcopy(costly)
    changed_schema["properties"]["m"] = {"type": "string"}
    assert messages(crd(changed_schema), old=stored(crd(costly))) == got


# --- decoding -------------------------------------------------------------------------------

DECODE = [
    pytest.param(
        obj(spec={"type": ["object", "null"]}),
        "json: cannot unmarshal array into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.type of type string",
        id="type-list-observed",
    ),
    pytest.param(obj(a={"type": "string", "maxLength": "5"}), "json: cannot unmarshal string into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.maxLength of type int64", id="string-for-int"),
    pytest.param(obj(a={"type": "string", "maxLength": 1.5}), "json: cannot unmarshal number 1.5 into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.maxLength of type int64", id="float-for-int"),
    pytest.param(obj(a={"type": "string", "required": "x"}), "json: cannot unmarshal string into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.required of type []string", id="string-for-list"),
    pytest.param(obj(a={"type": "object", "additionalProperties": "x"}), "boolean or JSON schema expected", id="additional-properties-string"),
    pytest.param(
        obj(a={"type": "array", "items": {"type": 5}}),
        # a type error inside a custom unmarshaler names the field holding it
        "json: cannot unmarshal number into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.items of type string",
        id="inside-items",
    ),
    pytest.param(
        obj(a={"type": "object", "x-kubernetes-validations": [{"rule": 1}]}),
        "json: cannot unmarshal number into Go struct field ValidationRule.spec.versions.schema.openAPIV3Schema.properties.x-kubernetes-validations.rule of type string",
        id="rule-number",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "expected"), DECODE)
def test_decode_errors(schema: dict[str, Any], expected: str) -> None:
    decoded = crdtypes.decode_crd(crd(schema), strict=True)
    assert decoded.error_message == expected
    with pytest.raises(CrdDecodeError, match=r"^(json|boolean)"):
        validate_crd(crd(schema))


def test_strict_decoding_paths() -> None:
    body = crd(obj(spec={"type": "object", "foo": 1, "items": {"type": "string", "bar": 2},
                         "additionalProperties": {"type": "string", "baz": 3}}))  # fmt: skip
    body["metadata"]["labelz"] = {}
    body["spec"]["versions"][0]["extra"] = True
    decoded = crdtypes.decode_crd(body, strict=True)
    assert decoded.error is None
    # map keys join with ".", as sigs.k8s.io/json reports them; items and
    # additionalProperties are decoded by custom unmarshalers without strictness
    assert decoded.strict == (
        'unknown field "metadata.labelz"',
        'unknown field "spec.versions[0].schema.openAPIV3Schema.properties.spec.foo"',
        'unknown field "spec.versions[0].extra"',
    )
    kept = decoded.value["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert kept == {
        "type": "object",
        "items": {"type": "string"},
        "additionalProperties": {"type": "string"},
    }
