"""The CEL part of CRD admission: what kube-apiserver reports about a schema's
x-kubernetes-validations rules when a CustomResourceDefinition is created or updated
(apiextensions validation's `CELErrors`), once the schema has no other error.

Input: the parsed openAPIV3Schema and the field path it is reported under. Output: field
errors, in schema walk order: compile errors of rules, transition rules on parts of the
schema that do not correlate with the old object.
"""

from __future__ import annotations

from dataclasses import replace

from probemarker.sim.crd import cel_check, rules
from probemarker.sim.crd.fielderr import FieldError
from probemarker.sim.crd.node import SchemaNode


def validate_schema_rules(root: SchemaNode, path: str) -> list[FieldError]:
    """CEL errors for every rule of the schema rooted at `root`, reported under `path`."""
    errors: list[FieldError] = []
    _walk(root, path, errors, correlatable=True, is_root=True)
    return errors


def _walk(
    node: SchemaNode, path: str, errors: list[FieldError], *, correlatable: bool, is_root: bool
) -> None:
    errors.extend(_node_rules(node, path, correlatable=correlatable, is_root=is_root))
    granular = correlatable and node.map_type != "atomic"
    for key, prop in node.properties.items():
        _walk(prop, f"{path}.properties[{key}]", errors, correlatable=granular, is_root=False)
    if isinstance(node.additional_properties, SchemaNode):
        _walk(
            node.additional_properties,
            f"{path}.additionalProperties",
            errors,
            correlatable=granular,
            is_root=False,
        )
    if node.items is not None:
        _walk(
            node.items,
            f"{path}.items",
            errors,
            correlatable=correlatable and node.list_type == "map",
            is_root=False,
        )


def _node_rules(
    node: SchemaNode, path: str, *, correlatable: bool, is_root: bool
) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, rule in enumerate(node.rules):
        rule_path = f"{path}.x-kubernetes-validations[{index}]"
        if not rule.rule.strip():
            continue
        item = rules.compile_rule(rule, node)
        if item.error is None and item.program is not None:
            undefined = cel_check.undefined_fields(item.program.ast, node, resource_root=is_root)
            if undefined:
                item = replace(item, error="\n".join(undefined))
        if item.error is not None:
            detail = f"compilation failed: {item.error}"
            errors.append(FieldError.invalid(f"{rule_path}.rule", node.type, detail))
        if item.program is not None and item.program.uses_old_self and not correlatable:
            detail = (
                f"oldSelf cannot be used on the uncorrelatable portion of the schema within {path}"
            )
            errors.append(FieldError.invalid(f"{rule_path}.rule", node.type, detail))
    return errors
