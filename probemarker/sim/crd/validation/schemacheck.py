"""One CRD schema as kube-apiserver checks it (apiextensions validation's
validateCustomResourceDefinitionValidation, Kubernetes 1.32).

Input: a decoded `CustomResourceValidation` (`{openAPIV3Schema: ...}`, see `crdtypes`), the
path it is reported under (`spec.validation` when every version has the same schema,
else `spec.versions[i].schema`), whether any version has the status subresource, and
whether per-expression CEL costs are to be ignored (an update leaving the schema as it
was). Output: field errors in the API server's order:

1. with the status subresource, the root may hold only some keywords (one error at most);
2. `nullable` at the root is forbidden;
3. when the schema can be made structural: the structural errors (`structural`) or, if none,
   the default errors (`schemadefaults`); when it cannot, NewStructural's error is kept
   and shown only if nothing else below is wrong;
4. the SchemaErrors of every node (`openapischema`);
5. the CEL errors (`celadmit`): only when step 3 found nothing, and for each node only when
   no SchemaError was found at or below it; the schema-wide cost total last.

So metadata, structural, default errors suppress every CEL error, and a list-type or
keyword error suppresses the CEL errors of its node and of the nodes above it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probemarker.sim.crd.gotext import gorepr
from probemarker.sim.crd.gotext.fielderr import FieldError
from probemarker.sim.crd.gotext.gorepr import invalid_rendered
from probemarker.sim.crd.schema.node import parse_schema
from probemarker.sim.crd.validation import celadmit
from probemarker.sim.crd.validation.newstructural import new_structural_error
from probemarker.sim.crd.validation.openapischema import walk_schema
from probemarker.sim.crd.validation.schemadefaults import validate_defaults
from probemarker.sim.crd.validation.structural import validate_structural

__all__ = ["validate_validation"]

# The JSONSchemaProps fields in the internal struct's order, and those allowed at the root
# of a schema whose CRD has the status subresource.
_FIELDS = (("id", "ID"), ("$schema", "Schema"), ("$ref", "Ref"), ("description", "Description"),
           ("type", "Type"), ("nullable", "Nullable"), ("format", "Format"), ("title", "Title"),
           ("default", "Default"), ("maximum", "Maximum"), ("exclusiveMaximum", "ExclusiveMaximum"),
           ("minimum", "Minimum"), ("exclusiveMinimum", "ExclusiveMinimum"),
           ("maxLength", "MaxLength"), ("minLength", "MinLength"), ("pattern", "Pattern"),
           ("maxItems", "MaxItems"), ("minItems", "MinItems"), ("uniqueItems", "UniqueItems"),
           ("multipleOf", "MultipleOf"), ("enum", "Enum"), ("maxProperties", "MaxProperties"),
           ("minProperties", "MinProperties"), ("required", "Required"), ("items", "Items"),
           ("allOf", "AllOf"), ("oneOf", "OneOf"), ("anyOf", "AnyOf"), ("not", "Not"),
           ("properties", "Properties"), ("additionalProperties", "AdditionalProperties"),
           ("patternProperties", "PatternProperties"), ("dependencies", "Dependencies"),
           ("additionalItems", "AdditionalItems"), ("definitions", "Definitions"),
           ("externalDocs", "ExternalDocs"), ("example", "Example"),
           ("x-kubernetes-preserve-unknown-fields", "XPreserveUnknownFields"),
           ("x-kubernetes-embedded-resource", "XEmbeddedResource"),
           ("x-kubernetes-int-or-string", "XIntOrString"),
           ("x-kubernetes-list-map-keys", "XListMapKeys"),
           ("x-kubernetes-list-type", "XListType"), ("x-kubernetes-map-type", "XMapType"),
           ("x-kubernetes-validations", "XValidations"))  # fmt: skip
_ALLOWED_AT_ROOT = ("Description", "Type", "Format", "Title", "Maximum", "ExclusiveMaximum",
                    "Minimum", "ExclusiveMinimum", "MaxLength", "MinLength", "Pattern",
                    "MaxItems", "MinItems", "UniqueItems", "MultipleOf", "Required", "Items",
                    "Properties", "ExternalDocs", "Example", "XPreserveUnknownFields",
                    "XValidations")  # fmt: skip
_PER_EXPRESSION_COST = (
    "Forbidden: estimated rule cost exceeds",
    "Forbidden: estimated messageExpression cost exceeds",
)


def validate_validation(
    validation: Mapping[str, Any] | None,
    path: str,
    *,
    status_enabled: bool,
    suppress_per_expression_cost: bool = False,
) -> list[FieldError]:
    if not isinstance(validation, Mapping):
        return []
    schema = validation.get("openAPIV3Schema")
    if not isinstance(schema, Mapping):
        return []
    root = f"{path}.openAPIV3Schema"
    errors: list[FieldError] = []
    if status_enabled:
        errors += _status_root(schema, path)
    if schema.get("nullable"):
        errors.append(
            FieldError.forbidden(f"{root}.nullable", "nullable cannot be true at the root")
        )
    init_error = new_structural_error(schema)
    structural_ok = False
    if init_error is None:
        found = validate_structural(schema, root) or validate_defaults(schema, root)
        errors += found
        structural_ok = not found
    walk = walk_schema(schema, root)
    errors += walk.errors
    if structural_ok:
        cel = celadmit.validate_schema_rules(parse_schema(walk.cel_schema), root)
        if suppress_per_expression_cost:
            cel = [e for e in cel if not e.body.startswith(_PER_EXPRESSION_COST)]
        errors += cel
    if not errors and init_error is not None:
        errors.append(FieldError.invalid(root, "", init_error))
    return errors


def _non_zero(schema: Mapping[str, Any], key: str) -> bool:
    value = schema.get(key)
    if isinstance(value, str | bool):
        return bool(value)
    return key in schema


def _status_root(schema: Mapping[str, Any], path: str) -> list[FieldError]:
    """Only some keywords at the root when the status subresource is enabled."""
    for key, go_name in _FIELDS:
        if not _non_zero(schema, key):
            continue
        if go_name == "Type":
            if schema["type"] != "object":
                detail = 'only "object" is allowed as the type at the root of the schema if the status subresource is enabled'
                return [FieldError.invalid(f"{path}.openAPIV3Schema.type", schema["type"], detail)]
            continue
        if go_name not in _ALLOWED_AT_ROOT:
            allowed = " ".join(_ALLOWED_AT_ROOT)
            detail = f"only [{allowed}] fields are allowed at the root of the schema if the status subresource is enabled"
            return [
                invalid_rendered(f"{path}.openAPIV3Schema", gorepr.schema_props(schema), detail)
            ]
    return []
