"""Validate a PodProbeMarker document (a JSON/YAML dict) against docs/api.md.

Stage: api (pure). Input: an untrusted dict, as read from a file or the API server.
Output: every `FieldError` at once, each naming its field path. Never raises on bad
input. The rules and messages come from `rules.py`, which the CRD generator uses too;
`tests/unit/api/test_agreement.py` proves the two agree on the corpus in tests/data.
Here: the document, its metadata, its probes and each probe's own fields; a probe's
`probe` field is checked by handlervalidation.py, the selector and the policies (the
labels and annotations read and written) by labelvalidation.py; the checks every part
repeats are fieldchecks.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probemarker.api import names, rules
from probemarker.api.fieldchecks import check_max_items, check_unique, required_str
from probemarker.api.fields import (
    Errors,
    FieldError,
    as_list,
    as_map,
    as_str,
    check_known,
    child,
    describe,
    index,
    matches,
)
from probemarker.api.handlervalidation import check_probe_spec
from probemarker.api.labelvalidation import (
    check_policies,
    check_selector,
    check_selector_labels_not_written,
)

_TOP_FIELDS = ("apiVersion", "kind", "metadata", "spec", "status")
_PROBE_FIELDS = ("name", "containerName", "probe", "markerPolicy", "podConditionType")


def validate_marker(doc: Any) -> list[FieldError]:
    """All problems with a PodProbeMarker document; empty when it is valid."""
    errors = Errors()
    top = as_map(doc, "", errors)
    if top is None:
        return errors.items
    check_known(top, _TOP_FIELDS, "", errors)
    _check_type_meta(top, errors)
    _check_metadata(top.get("metadata"), errors)
    spec = top.get("spec")
    if spec is None:
        errors.add("spec", "required: a PodProbeMarker needs spec.selector and spec.probes")
    elif (spec_map := as_map(spec, "spec", errors)) is not None:
        check_known(spec_map, ("selector", "probes"), "spec", errors)
        check_selector(spec_map.get("selector"), "spec.selector", errors)
        _check_probes(spec_map.get("probes"), "spec.probes", errors)
        check_selector_labels_not_written(spec_map, errors)
    return errors.items


def validate_marker_update(old: Any, new: Any) -> list[FieldError]:
    """Problems with replacing `old` by `new`: `new` must be valid and keep its selector."""
    problems = validate_marker(new)
    old_spec = old.get("spec") if isinstance(old, Mapping) else None
    new_spec = new.get("spec") if isinstance(new, Mapping) else None
    if (
        isinstance(old_spec, Mapping)
        and isinstance(new_spec, Mapping)
        and old_spec.get("selector") != new_spec.get("selector")
    ):
        problems.append(FieldError("spec.selector", rules.MSG_SELECTOR_IMMUTABLE))
    return problems


def _check_type_meta(top: Mapping[str, Any], errors: Errors) -> None:
    api_version, kind = top.get("apiVersion"), top.get("kind")
    if api_version not in rules.ACCEPTED_API_VERSIONS:
        errors.add(
            "apiVersion",
            f"must be {' or '.join(rules.ACCEPTED_API_VERSIONS)}, got {describe(api_version)}",
        )
    if kind != rules.KIND:
        errors.add("kind", f'must be "{rules.KIND}", got {describe(kind)}')


def _check_metadata(value: Any, errors: Errors) -> None:
    if value is None:
        errors.add("metadata.name", "required: give the marker a name")
        return
    meta = as_map(value, "metadata", errors)
    if meta is None:
        return
    name, generate_name = meta.get("name"), meta.get("generateName")
    if name is None and generate_name is None:
        errors.add("metadata.name", "required: give the marker a name")
    elif name is not None and (text := as_str(name, "metadata.name", errors)) is not None:
        for problem in names.dns1123_subdomain_problems(text):
            errors.add("metadata.name", problem)
    namespace = meta.get("namespace")
    if namespace is not None and (ns := as_str(namespace, "metadata.namespace", errors)):
        for problem in names.dns1123_label_problems(ns):
            errors.add("metadata.namespace", problem)


def _check_probes(value: Any, path: str, errors: Errors) -> None:
    if value is None:
        errors.add(path, "required: list at least one probe")
        return
    probes = as_list(value, path, errors)
    if probes is None:
        return
    if not probes:
        errors.add(path, "must list at least one probe")
    check_max_items(probes, rules.MAX_PROBES, path, errors)
    seen_names: dict[str, int] = {}
    seen_types: dict[str, int] = {}
    for i, item in enumerate(probes):
        item_path = index(path, i)
        probe = as_map(item, item_path, errors)
        if probe is None:
            continue
        _check_probe(probe, item_path, errors)
        check_unique(
            probe.get("name"),
            seen=seen_names,
            i=i,
            path=child(item_path, "name"),
            list_path=path,
            errors=errors,
            message=rules.MSG_PROBE_NAMES_UNIQUE,
        )
        check_unique(
            probe.get("podConditionType"),
            seen=seen_types,
            i=i,
            path=child(item_path, "podConditionType"),
            list_path=path,
            errors=errors,
            message=rules.MSG_CONDITION_TYPES_UNIQUE,
        )


def _check_probe(probe: Mapping[str, Any], path: str, errors: Errors) -> None:
    check_known(probe, _PROBE_FIELDS, path, errors)
    name = required_str(probe, "name", path, errors, "a probe name, unique in the marker")
    if name is not None:
        if not name:
            errors.add(child(path, "name"), "must not be empty")
        elif not matches(rules.PROBE_NAME_RE, name):
            errors.add(child(path, "name"), rules.MSG_PROBE_NAME)
        elif len(name) > rules.MAX_PROBE_NAME_LENGTH:
            errors.add(
                child(path, "name"),
                f"must be no more than {rules.MAX_PROBE_NAME_LENGTH} characters",
            )
    container = required_str(
        probe, "containerName", path, errors, "the name of the container to probe"
    )
    if container is not None:
        for problem in names.dns1123_label_problems(container):
            errors.add(child(path, "containerName"), f"{problem} (it names a container of the pod)")
    if "probe" not in probe:
        errors.add(
            child(path, "probe"), "required: say how to probe (exec, httpGet, tcpSocket or grpc)"
        )
    elif (spec := as_map(probe["probe"], child(path, "probe"), errors)) is not None:
        check_probe_spec(spec, child(path, "probe"), errors)
    has_policy = check_policies(probe.get("markerPolicy"), child(path, "markerPolicy"), errors)
    condition = probe.get("podConditionType")
    if condition is not None:
        _check_condition_type(condition, child(path, "podConditionType"), errors)
    elif not has_policy:
        errors.add(path, rules.MSG_POLICY_OR_CONDITION)


def _check_condition_type(value: Any, path: str, errors: Errors) -> None:
    text = as_str(value, path, errors)
    if text is None:
        return
    for problem in names.qualified_name_problems(text):
        errors.add(path, f"must be a qualified name: {problem}")
    if text in rules.RESERVED_CONDITION_TYPES:
        errors.add(path, f'"{text}" {rules.MSG_RESERVED_CONDITION}')
    if matches(rules.RESERVED_KEY_PREFIX_RE, text):
        errors.add(path, rules.MSG_RESERVED_CONDITION_PREFIX)
