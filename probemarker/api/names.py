"""Kubernetes name rules: label keys and values, annotations, DNS names, port names.

Stage: api (pure). Each check returns a list of reasons (empty when valid), worded
for a user who has to fix the value. The rules follow
k8s.io/apimachinery/pkg/util/validation and the patterns in `rules.py`, which the
CRD's CEL rules use too.
"""

from __future__ import annotations

from probemarker.api import rules
from probemarker.api.fields import matches


def qualified_name_problems(key: str, *, any_case_prefix: bool = False) -> list[str]:
    """Why `key` is not a qualified name (label key; annotation key when any_case_prefix)."""
    if not key:
        return ["must not be empty"]
    prefix, slash, name = key.rpartition("/")
    problems: list[str] = []
    if slash:
        if not prefix:
            problems.append("prefix part must not be empty")
        elif len(prefix) > rules.MAX_QUALIFIED_NAME_PREFIX_LENGTH:
            problems.append(
                f"prefix part must be no more than {rules.MAX_QUALIFIED_NAME_PREFIX_LENGTH} "
                "characters"
            )
    if len(name) > rules.MAX_QUALIFIED_NAME_NAME_LENGTH:
        problems.append(
            f"name part must be no more than {rules.MAX_QUALIFIED_NAME_NAME_LENGTH} characters"
        )
    pattern = rules.ANNOTATION_KEY_RE if any_case_prefix else rules.QUALIFIED_NAME_RE
    if not problems and not matches(pattern, key):
        problems.append(
            "must be an optional DNS subdomain prefix (lower-case alphanumerics, '-' and '.') "
            "and '/', then a name of alphanumerics, '-', '_' or '.', starting and ending with "
            "an alphanumeric, e.g. 'example.com/idle' or 'idle'"
        )
    return problems


def label_value_problems(value: str) -> list[str]:
    if len(value) > rules.MAX_LABEL_VALUE_LENGTH:
        return [f"must be no more than {rules.MAX_LABEL_VALUE_LENGTH} characters"]
    if not matches(rules.LABEL_VALUE_RE, value):
        return [
            "must be empty or alphanumerics, '-', '_' or '.', starting and ending with an "
            "alphanumeric, e.g. 'true' or 'v1.2'"
        ]
    return []


def annotation_value_problems(value: str) -> list[str]:
    size = len(value.encode("utf-8"))
    if size > rules.MAX_ANNOTATION_VALUE_BYTES:
        return [f"must be no more than {rules.MAX_ANNOTATION_VALUE_BYTES} bytes, got {size}"]
    return []


def dns1123_label_problems(value: str) -> list[str]:
    if len(value) > rules.MAX_DNS1123_LABEL_LENGTH:
        return [f"must be no more than {rules.MAX_DNS1123_LABEL_LENGTH} characters"]
    if not matches(rules.DNS1123_LABEL_RE, value):
        return [
            "must be a DNS label: lower-case alphanumerics or '-', starting and ending with "
            "an alphanumeric"
        ]
    return []


def dns1123_subdomain_problems(value: str) -> list[str]:
    if len(value) > rules.MAX_DNS1123_SUBDOMAIN_LENGTH:
        return [f"must be no more than {rules.MAX_DNS1123_SUBDOMAIN_LENGTH} characters"]
    if not matches(rules.DNS1123_SUBDOMAIN_RE, value):
        return [
            "must be a DNS subdomain: lower-case alphanumerics, '-' or '.', starting and "
            "ending with an alphanumeric"
        ]
    return []


def port_problems(port: int | str) -> list[str]:
    """A port number 1-65535 or an IANA_SVC_NAME port name."""
    if isinstance(port, int):
        return [] if 1 <= port <= 65535 else [rules.MSG_PORT]
    valid = len(port) <= rules.MAX_PORT_NAME_LENGTH and matches(rules.PORT_NAME_RE, port)
    return [] if valid else [rules.MSG_PORT]
