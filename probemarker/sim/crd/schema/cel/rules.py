"""x-kubernetes-validations: compile every rule of a schema once, evaluate them over an object
the way apiextensions-apiserver's schema/cel Validator does.

- Rules of a node run only when the node's value is present and not null.
- `self` is the node's value; at the resource root (and in embedded resources) only apiVersion,
  kind, metadata.name and metadata.generateName of the metadata are visible.
- Transition rules (mentioning oldSelf) run only on update and only where an old value
  correlates: object properties and map keys (granular and atomic maps alike, as
  MapIsCorrelatable has it) and items of
  x-kubernetes-list-type: map lists (matched by their keys). Other list items never correlate.
- Errors: `<path>: Invalid value: "<schema type>": <message>`; the root's path is `<nil>`;
  fieldPath/reason/messageExpression honoured. Runtime errors:
  `<cel error> evaluating rule: <message or rule>`.
- Ratcheting on update: a failing non-transition rule is dropped when its node (or, for a
  node that does not correlate, its nearest correlating ancestor) equals the old value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from probemarker.sim.crd.gotext.fielderr import FieldError
from probemarker.sim.crd.schema.cel import engine
from probemarker.sim.crd.schema.node import Rule, SchemaNode

_NONE: Any = object()
_MAX_MESSAGE_BYTES = 5 * 1024


@dataclass(frozen=True, slots=True)
class CompiledRule:
    rule: Rule
    program: engine.CelProgram | None
    message_program: engine.CelProgram | None
    error: str | None
    field_path: str
    field_path_error: str | None = None


def rule_error_string(rule: Rule) -> str:
    return rule.message.strip() if rule.message else rule.rule.strip()


def normalize_field_path(field_path: str, schema: SchemaNode) -> str:
    """cel.ValidFieldPath: `.a.b`, `.a['k.x']`, `['a']` -> a field.Path string; ValueError if it
    does not refer to a field of `schema`."""
    parts: list[str] = []
    text, node = field_path, schema
    pos = 0
    while pos < len(text):
        if text[pos] == ".":
            end = pos + 1
            while end < len(text) and text[end] not in ".[":
                end += 1
            name, pos = text[pos + 1 : end], end
        elif text.startswith("['", pos):
            end = text.find("']", pos + 2)
            if end < 0:
                raise ValueError("unexpected end of JSON path")
            name, pos = text[pos + 2 : end].replace("\\'", "'"), end + 2
        else:
            raise ValueError(f"expected [ or . but got: {text[pos:]}")
        if not name:
            raise ValueError("unexpected end of JSON path")
        if node.properties:
            if name not in node.properties:
                raise ValueError("does not refer to a valid field")
            node = node.properties[name]
            parts.append(("." if parts else "") + name)
        elif node.additional_schema is not None:
            node = node.additional_schema
            parts.append(f"[{name}]")
        else:
            raise ValueError("does not refer to a valid field")
    return "".join(parts)


def compile_rule(rule: Rule, schema: SchemaNode) -> CompiledRule:
    """Compile one rule of `schema`; a compile problem goes into `.error`, an invalid
    fieldPath into `.field_path_error`."""
    program = message_program = None
    error = field_path_error = None
    field_path = ""
    try:
        program = engine.compile_cel(rule.rule)
        if rule.message_expression:
            message_program = engine.compile_cel(rule.message_expression)
    except engine.CelCompileError as exc:
        error = str(exc)
    if rule.field_path:
        try:
            field_path = normalize_field_path(rule.field_path, schema)
        except ValueError as exc:
            field_path_error = str(exc)
    return CompiledRule(rule, program, message_program, error, field_path, field_path_error)


def _join(path: str, child: str) -> str:
    if not child:
        return path
    if child.startswith("["):
        return path + child
    return f"{path}.{child}" if path else child


def _render(path: str) -> str:
    return path if path else "<nil>"


class CompiledRules:
    """All compiled rules of one schema, keyed by node identity (the nodes are kept alive)."""

    def __init__(self, root: SchemaNode) -> None:
        self.root = root
        self._by_node: dict[int, tuple[CompiledRule, ...]] = {}
        self._nodes: list[SchemaNode] = []
        self.count = 0
        stack = [root]
        while stack:
            node = stack.pop()
            if node.rules:
                self._nodes.append(node)
                self._by_node[id(node)] = tuple(compile_rule(r, node) for r in node.rules)
                self.count += len(node.rules)
            stack.extend(node.properties.values())
            stack.extend(node.all_of)
            if node.items is not None:
                stack.append(node.items)
            if isinstance(node.additional_properties, SchemaNode):
                stack.append(node.additional_properties)

    def rules_of(self, node: SchemaNode) -> tuple[CompiledRule, ...]:
        return self._by_node.get(id(node), ())

    def compile_errors(self) -> list[tuple[SchemaNode, int, str]]:
        """(node, rule index, error) for every rule that does not compile."""
        return [
            (node, index, item.error)
            for node in self._nodes
            for index, item in enumerate(self._by_node[id(node)])
            if item.error is not None
        ]

    def validate(
        self, obj: Mapping[str, Any], *, old: Mapping[str, Any] | None
    ) -> list[FieldError]:
        if not self.count:
            return []
        walk = _Walk(self)
        return walk.node(obj, self.root, "", old if old is not None else _NONE, False, root=True)


def compile_rules(root: SchemaNode) -> CompiledRules:
    return CompiledRules(root)


class _Walk:
    def __init__(self, rules: CompiledRules) -> None:
        self.rules = rules

    def node(
        self,
        value: Any,
        schema: SchemaNode,
        path: str,
        old: Any,
        inherited: bool,
        *,
        root: bool = False,
    ) -> list[FieldError]:
        if value is None:
            return []
        ratchet = (old == value) if old is not _NONE else inherited
        errors: list[FieldError] = []
        embedded = root or schema.embedded_resource
        for node in (schema, *schema.all_of):
            errors.extend(self._expressions(node, schema, value, path, old, ratchet, embedded))
        if isinstance(value, list) and schema.items is not None:
            for index, item in enumerate(value):
                item_old = _correlate_item(old, item, schema)
                errors.extend(self.node(item, schema.items, f"{path}[{index}]", item_old, ratchet))
        elif isinstance(value, dict):
            uncorrelated = not isinstance(old, dict)
            additional = schema.additional_schema
            for key, child in value.items():
                child_old = _NONE if uncorrelated else old.get(key, _NONE)
                if key in schema.properties:
                    prop = schema.properties[key]
                    errors.extend(self.node(child, prop, _join(path, key), child_old, ratchet))
                elif additional is not None:
                    errors.extend(
                        self.node(child, additional, f"{path}[{key}]", child_old, ratchet)
                    )
        return errors

    def _expressions(
        self,
        node: SchemaNode,
        schema: SchemaNode,
        value: Any,
        path: str,
        old: Any,
        ratchet: bool,
        embedded: bool,
    ) -> list[FieldError]:
        compiled = self.rules.rules_of(node)
        if not compiled:
            return []
        errors: list[FieldError] = []
        variables = {"self": engine.to_cel(value, schema, resource_root=embedded)}
        if old is not _NONE:
            variables["oldSelf"] = engine.to_cel(old, schema, resource_root=embedded)
        type_value = schema.type
        for item in compiled:
            if item.error is not None or item.program is None:
                errors.append(
                    FieldError.invalid(
                        _render(path), type_value, f"rule compile error: {item.error}"
                    )
                )
                continue
            rule_variables = variables
            if item.rule.optional_old_self:
                # optionalOldSelf (ratcheting): evaluated on create too, oldSelf an optional.
                present = old is not _NONE
                rule_variables = {
                    **variables,
                    "oldSelf": engine.CelOptional(variables.get("oldSelf"), present=present),
                }
            elif item.program.uses_old_self and old is _NONE:
                continue
            try:
                result = item.program.evaluate(rule_variables)
            except engine.CelError as exc:
                errors.append(
                    FieldError.invalid(
                        _render(path), type_value, _runtime_detail(str(exc), item.rule)
                    )
                )
                continue
            if engine.cast_bool(result) is True:
                continue
            if ratchet and not item.program.uses_old_self:
                continue
            detail = _message(item, variables)
            errors.append(
                _reason_error(
                    _render(_join(path, item.field_path)), type_value, detail, item.rule.reason
                )
            )
        return errors


def _runtime_detail(error: str, rule: Rule) -> str:
    if error.startswith("no such overload"):
        return (
            f"'{error}': call arguments did not match a supported operator, function or macro "
            f"signature for rule: {rule_error_string(rule)}"
        )
    return f"{error} evaluating rule: {rule_error_string(rule)}"


def _message(item: CompiledRule, variables: Mapping[str, Any]) -> str:
    if item.message_program is not None:
        try:
            text = engine.cel_to_text(item.message_program.evaluate(variables))
        except engine.CelError:
            text = None
        if text is not None:
            text = text.strip()
            if text and "\n" not in text and len(text.encode()) <= _MAX_MESSAGE_BYTES:
                return text
    if item.rule.message:
        return item.rule.message.strip()
    return f"failed rule: {rule_error_string(item.rule)}"


def _reason_error(path: str, type_value: str, detail: str, reason: str) -> FieldError:
    if reason == "FieldValueForbidden":
        return FieldError.forbidden(path, detail)
    if reason == "FieldValueRequired":
        return FieldError.required(path, detail)
    if reason == "FieldValueDuplicate":
        return FieldError.duplicate(path, type_value)
    return FieldError.invalid(path, type_value, detail)


def _correlate_item(old: Any, item: Any, schema: SchemaNode) -> Any:
    if schema.list_type != "map" or not isinstance(old, list) or not isinstance(item, dict):
        return _NONE
    for candidate in old:
        if isinstance(candidate, dict) and all(
            candidate.get(k) == item.get(k) for k in schema.list_map_keys
        ):
            return candidate
    return _NONE
