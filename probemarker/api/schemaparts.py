"""The building blocks of the CRD's schema: CEL rules, and the label and annotation maps.

Stage: api (pure), under crd.py and probeschema.py. Input: the limits, patterns and messages of
`rules.py`. Output: pieces of OpenAPI schema: a CEL rule (`cel`) and a CEL string
literal (`quote`); the CEL test of a qualified name (`qualified_name_rule`); a label
value (`LABEL_VALUE`); a map of labels (`label_map`, a value of a written one may
hold `{{.Result}}`) or of annotations (`annotation_map`), bounded, their keys checked
in CEL, and refusing Kubernetes' reserved prefixes where probemarker writes them.
Standard CEL only: no Kubernetes CEL extension library.
"""

from __future__ import annotations

from typing import Any

from probemarker.api import rules

__all__ = [
    "LABEL_VALUE",
    "Schema",
    "annotation_map",
    "cel",
    "label_map",
    "qualified_name_rule",
    "quote",
]

Schema = dict[str, Any]


def cel(rule: str, message: str, **extra: str) -> dict[str, str]:
    return {"rule": rule, "message": message, **extra}


def quote(text: str) -> str:
    """A CEL single-quoted string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def qualified_name_rule(var: str, pattern: str = rules.QUALIFIED_NAME_RE) -> str:
    """CEL: `var` is a qualified name (pattern, and a prefix of at most 253 characters)."""
    return (
        f"{var}.matches({quote(pattern)}) && (!{var}.contains('/') "
        f"|| {var}.matches({quote(rules.QUALIFIED_NAME_PREFIX_LENGTH_RE)}))"
    )


def _string_map(
    description: str,
    *,
    key_pattern: str,
    value_schema: Schema,
    value_rules: list[dict[str, str]],
    written: bool,
) -> Schema:
    """A labels or annotations map: bounded, keys qualified names, values by `value_schema`
    (and `value_rules` where OpenAPI cannot say it); maps probemarker writes onto pods
    (`written`) refuse Kubernetes' reserved prefixes. Map keys have no OpenAPI schema, so
    they are checked in CEL; the API server costs a key as a near-empty string, so each
    key rule costs little more than one iteration per entry (maxProperties bounds them)."""
    validations = [
        cel(f"self.all(k, {qualified_name_rule('k', key_pattern)})", rules.MSG_LABEL_KEYS),
        *value_rules,
    ]
    if written:
        validations += [
            cel(f"self.all(k, !k.matches({quote(pattern)}))", message)
            for pattern, message in (
                (rules.RESERVED_KEY_PREFIX_RE, rules.MSG_RESERVED_KEY_PREFIX),
                (rules.OWN_KEY_PREFIX_RE, rules.MSG_OWN_KEY_PREFIX),
            )
        ]
    return {
        "type": "object",
        "description": description,
        "maxProperties": rules.MAX_POLICY_ENTRIES,
        "additionalProperties": value_schema,
        "x-kubernetes-validations": validations,
    }


# A label value: OpenAPI says it all (no CEL needed).
LABEL_VALUE: Schema = {
    "type": "string",
    "maxLength": rules.MAX_LABEL_VALUE_LENGTH,
    "pattern": rules.LABEL_VALUE_RE,
}


# A markerPolicy label value may hold {{.Result}} (api/template.py): the pattern
# counts the action as one character of a label value, so it bounds the value at 63
# characters for a one-character result; the rendered value is checked on each write.
_LABEL_TEMPLATE: Schema = {
    "type": "string",
    "maxLength": rules.MAX_LABEL_TEMPLATE_LENGTH,
    "pattern": rules.LABEL_TEMPLATE_RE,
}


def label_map(description: str, *, written: bool) -> Schema:
    return _string_map(
        description,
        key_pattern=rules.QUALIFIED_NAME_RE,
        value_schema=dict(_LABEL_TEMPLATE if written else LABEL_VALUE),
        value_rules=[],
        written=written,
    )


def annotation_map(description: str) -> Schema:
    # maxLength counts characters; the limit is in bytes, which only CEL can count.
    return _string_map(
        description,
        key_pattern=rules.ANNOTATION_KEY_RE,
        value_schema={
            "type": "string",
            "maxLength": rules.MAX_ANNOTATION_VALUE_BYTES,
            # every {{ begins {{.Result}}, the one template action accepted
            "pattern": rules.ANNOTATION_TEMPLATE_RE,
        },
        value_rules=[
            cel(
                f"self.all(k, size(bytes(self[k])) <= {rules.MAX_ANNOTATION_VALUE_BYTES})",
                rules.MSG_ANNOTATION_VALUES,
            )
        ],
        written=True,
    )
