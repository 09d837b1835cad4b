"""ObjectMeta checks kube-apiserver runs on every custom resource write before the schema
(apimachinery ValidateObjectMetaAccessor with NameIsDNSSubdomain): name/generateName,
namespace, labels and annotations, worded as apimachinery's validation package words them.
Owner references, finalizers and managed fields are not checked here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from probemarker.sim.crd.gotext.fielderr import FieldError

_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
_QNAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = "(" + _QNAME + ")?"
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_ANNOTATIONS_LIMIT = 256 * 1024


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery validation.RegexError."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    msg += " (e.g. "
    for index, example in enumerate(examples):
        if index:
            msg += " or "
        msg += f"'{example}', "
    return msg + f"regex used for validation is '{fmt}')"


def dns1123_subdomain(value: str) -> list[str]:
    errors = []
    if len(value) > 253:
        errors.append("must be no more than 253 characters")
    if not re.fullmatch(_DNS1123_SUBDOMAIN, value):
        msg = (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character"
        )
        errors.append(_regex_error(msg, _DNS1123_SUBDOMAIN, "example.com"))
    return errors


def dns1123_label(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not re.fullmatch(_DNS1123_LABEL, value):
        msg = (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
            "and must start and end with an alphanumeric character"
        )
        errors.append(_regex_error(msg, _DNS1123_LABEL, "my-name", "123-abc"))
    return errors


def qualified_name(value: str) -> list[str]:
    """validation.IsQualifiedName."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + _regex_error(_QNAME_MSG, _QNAME, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend("prefix part " + m for m in dns1123_subdomain(parts[0]))
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not re.fullmatch(_QNAME, name):
        errors.append(
            "name part " + _regex_error(_QNAME_MSG, _QNAME, "MyName", "my.name", "123-abc")
        )
    return errors


def label_value(value: str) -> list[str]:
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not re.fullmatch(_LABEL_VALUE, value):
        msg = (
            "a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character"
        )
        errors.append(_regex_error(msg, _LABEL_VALUE, "MyValue", "my_value", "12345"))
    return errors


def _mask_trailing_dash(name: str) -> str:
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def validate_metadata(obj: Mapping[str, Any], *, namespaced: bool) -> list[FieldError]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    errors: list[FieldError] = []
    generate = str(meta.get("generateName") or "")
    if generate:
        for msg in dns1123_subdomain(_mask_trailing_dash(generate)):
            errors.append(FieldError.invalid("metadata.generateName", generate, msg))
    name = str(meta.get("name") or "")
    if not name:
        errors.append(FieldError.required("metadata.name", "name or generateName is required"))
    else:
        errors.extend(FieldError.invalid("metadata.name", name, m) for m in dns1123_subdomain(name))
    namespace = str(meta.get("namespace") or "")
    if namespaced and not namespace:
        errors.append(FieldError.required("metadata.namespace"))
    elif namespaced:
        errors.extend(
            FieldError.invalid("metadata.namespace", namespace, m) for m in dns1123_label(namespace)
        )
    elif namespace:
        errors.append(FieldError.forbidden("metadata.namespace", "not allowed on this type"))
    labels = meta.get("labels")
    if isinstance(labels, Mapping):
        for key, value in labels.items():
            errors.extend(
                FieldError.invalid("metadata.labels", key, m) for m in qualified_name(key)
            )
            text = value if isinstance(value, str) else ""
            errors.extend(FieldError.invalid("metadata.labels", text, m) for m in label_value(text))
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping):
        for key in annotations:
            msgs = qualified_name(str(key).lower())
            errors.extend(FieldError.invalid("metadata.annotations", key, m) for m in msgs)
        size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())
        if size > _ANNOTATIONS_LIMIT:
            errors.append(FieldError.too_long("metadata.annotations", _ANNOTATIONS_LIMIT))
    return errors
