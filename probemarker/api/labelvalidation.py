"""Validate what a marker reads and writes of a pod's labels and annotations.

Stage: api (pure), under validation.py. Input: the untrusted `spec.selector`, a
probe's `markerPolicy` list, or the whole `spec`, with their field paths. Output: the
problems, recorded in the pass's `Errors`: the selector (`check_selector`: its labels
and requirements, never empty), the policies (`check_policies`: one per state, the
label and annotation maps they write, `{{.Result}}` in their values, no reserved or
own key prefix) and the rule between the two (`check_selector_labels_not_written`:
no policy writes a label the selector reads). The limits and messages are
`rules.py`'s, which the CRD (crd.py, probeschema.py) states too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from probemarker.api import names, rules, template
from probemarker.api.fieldchecks import check_max_items, check_unique, required_str
from probemarker.api.fields import (
    Errors,
    as_list,
    as_map,
    as_str,
    as_string_map,
    check_known,
    child,
    describe,
    index,
    matches,
)

__all__ = ["check_policies", "check_selector", "check_selector_labels_not_written"]


def check_selector(value: Any, path: str, errors: Errors) -> None:
    if value is None:
        errors.add(path, f"required: {rules.MSG_SELECTOR_EMPTY}")
        return
    selector = as_map(value, path, errors)
    if selector is None:
        return
    check_known(selector, ("matchLabels", "matchExpressions"), path, errors)
    match_labels = selector.get("matchLabels")
    labels = (
        {}
        if match_labels is None
        else as_string_map(match_labels, child(path, "matchLabels"), errors)
    )
    if labels:
        _check_labels(labels, child(path, "matchLabels"), errors)
    raw_expressions = selector.get("matchExpressions")
    expressions: Sequence[Any] | None = ()
    if raw_expressions is not None:
        expressions = as_list(raw_expressions, child(path, "matchExpressions"), errors)
        check_max_items(
            expressions, rules.MAX_SELECTOR_EXPRESSIONS, child(path, "matchExpressions"), errors
        )
        for i, item in enumerate(expressions or ()):
            _check_requirement(item, index(child(path, "matchExpressions"), i), errors)
    if labels is not None and expressions is not None and not labels and not expressions:
        errors.add(path, rules.MSG_SELECTOR_EMPTY)


def _check_requirement(value: Any, path: str, errors: Errors) -> None:
    requirement = as_map(value, path, errors)
    if requirement is None:
        return
    check_known(requirement, ("key", "operator", "values"), path, errors)
    key = required_str(requirement, "key", path, errors, "the label key to test")
    if key is not None:
        for problem in names.qualified_name_problems(key):
            errors.add(child(path, "key"), problem)
    operator = required_str(
        requirement, "operator", path, errors, "In, NotIn, Exists or DoesNotExist"
    )
    if operator is not None and operator not in rules.SELECTOR_OPERATORS:
        allowed = ", ".join(f'"{op}"' for op in rules.SELECTOR_OPERATORS)
        errors.add(child(path, "operator"), f"must be one of {allowed}, got {describe(operator)}")
    raw_values = requirement.get("values")
    values = [] if raw_values is None else as_list(raw_values, child(path, "values"), errors)
    if values is None:
        return
    check_max_items(values, rules.MAX_SELECTOR_VALUES, child(path, "values"), errors)
    for i, item in enumerate(values):
        text = as_str(item, index(child(path, "values"), i), errors)
        for problem in names.label_value_problems(text) if text is not None else ():
            errors.add(index(child(path, "values"), i), problem)
    if operator in ("In", "NotIn") and not values:
        errors.add(child(path, "values"), rules.MSG_SELECTOR_VALUES_REQUIRED)
    if operator in ("Exists", "DoesNotExist") and values:
        errors.add(child(path, "values"), rules.MSG_SELECTOR_VALUES_FORBIDDEN)


def check_policies(value: Any, path: str, errors: Errors) -> bool:
    """Validate markerPolicy; True when it has at least one entry."""
    if value is None:
        return False
    policies = as_list(value, path, errors)
    if policies is None:
        return True  # present but broken: already reported, do not pile on
    check_max_items(policies, rules.MAX_POLICIES, path, errors)
    seen: dict[str, int] = {}
    for i, item in enumerate(policies):
        policy = as_map(item, index(path, i), errors)
        if policy is None:
            continue
        _check_policy(policy, index(path, i), errors)
        check_unique(
            policy.get("state"),
            seen=seen,
            i=i,
            path=child(index(path, i), "state"),
            list_path=path,
            errors=errors,
            message=rules.MSG_POLICY_STATES_UNIQUE,
        )
    return bool(policies)


def _check_policy(policy: Mapping[str, Any], path: str, errors: Errors) -> None:
    check_known(policy, ("state", "labels", "annotations"), path, errors)
    state = required_str(policy, "state", path, errors, '"Succeeded" or "Failed"')
    if state is not None and state not in rules.STATES:
        errors.add(child(path, "state"), f'must be "Succeeded" or "Failed", got {describe(state)}')
    labels = as_string_map(policy.get("labels", {}), child(path, "labels"), errors)
    annotations = as_string_map(policy.get("annotations", {}), child(path, "annotations"), errors)
    if labels:
        _check_labels(labels, child(path, "labels"), errors)
        _check_written_keys(labels, child(path, "labels"), errors)
    if annotations:
        _check_annotations(annotations, child(path, "annotations"), errors)
        _check_written_keys(annotations, child(path, "annotations"), errors)
    if labels == {} and annotations == {}:
        errors.add(path, rules.MSG_POLICY_EMPTY)


def _check_labels(labels: Mapping[str, str], path: str, errors: Errors) -> None:
    _check_max_entries(labels, path, errors)
    for key, value in labels.items():
        for problem in names.qualified_name_problems(key):
            errors.add(index(path, key), f"key {describe(key)}: {problem}")
        for problem in template.template_problems(value) or _label_template_problems(value):
            errors.add(index(path, key), f"value {describe(value)}: {problem}")


def _label_template_problems(value: str) -> list[str]:
    """A label value, or one with `{{.Result}}`: valid for some result (the action
    counted as one character; the rendered value is checked again on every write)."""
    if not template.uses_result(value):
        return names.label_value_problems(value)
    if len(value) > rules.MAX_LABEL_TEMPLATE_LENGTH:
        return [f"must be no more than {rules.MAX_LABEL_TEMPLATE_LENGTH} characters"]
    problems = names.label_value_problems(template.render(value, "x"))
    return [f"with {{{{.Result}}}} as one character, {p}" for p in problems]


def _check_annotations(annotations: Mapping[str, str], path: str, errors: Errors) -> None:
    _check_max_entries(annotations, path, errors)
    for key, value in annotations.items():
        for problem in names.qualified_name_problems(key, any_case_prefix=True):
            errors.add(index(path, key), f"key {describe(key)}: {problem}")
        for problem in names.annotation_value_problems(value) or template.template_problems(value):
            errors.add(index(path, key), f"value: {problem}")


def _check_written_keys(mapping: Mapping[str, str], path: str, errors: Errors) -> None:
    for key in mapping:
        if matches(rules.RESERVED_KEY_PREFIX_RE, key):
            errors.add(index(path, key), rules.MSG_RESERVED_KEY_PREFIX)
        elif matches(rules.OWN_KEY_PREFIX_RE, key):
            errors.add(index(path, key), rules.MSG_OWN_KEY_PREFIX)


def check_selector_labels_not_written(spec: Mapping[str, Any], errors: Errors) -> None:
    """No policy label may be one the selector reads (issue 15): setting it would
    deselect the pod, deselecting removes it, and the pod is selected again, forever.
    A cross-field rule, like the CRD's on spec; it reads only the well-typed parts
    (the rest is reported by the field checks)."""
    read = _selector_keys(spec.get("selector"))
    probes = spec.get("probes")
    if not read or not isinstance(probes, list | tuple):
        return
    for i, probe in enumerate(probes):
        policies = probe.get("markerPolicy") if isinstance(probe, Mapping) else None
        for j, policy in enumerate(policies if isinstance(policies, list | tuple) else ()):
            labels = policy.get("labels") if isinstance(policy, Mapping) else None
            path = child(index(child(index("spec.probes", i), "markerPolicy"), j), "labels")
            for key in labels if isinstance(labels, Mapping) else ():
                if key in read:
                    errors.add(
                        path, f"writes label {describe(key)}, {rules.MSG_SELECTOR_LABEL_WRITTEN}"
                    )


def _selector_keys(selector: Any) -> frozenset[str]:
    """The label keys a selector reads: its matchLabels keys and matchExpressions keys."""
    if not isinstance(selector, Mapping):
        return frozenset()
    labels = selector.get("matchLabels")
    expressions = selector.get("matchExpressions")
    keys = [k for k in labels if isinstance(k, str)] if isinstance(labels, Mapping) else []
    for item in expressions if isinstance(expressions, list | tuple) else ():
        if isinstance(item, Mapping) and isinstance(item.get("key"), str):
            keys.append(item["key"])
    return frozenset(keys)


def _check_max_entries(mapping: Mapping[str, str], path: str, errors: Errors) -> None:
    if len(mapping) > rules.MAX_POLICY_ENTRIES:
        errors.add(
            path, f"must have at most {rules.MAX_POLICY_ENTRIES} entries, got {len(mapping)}"
        )
