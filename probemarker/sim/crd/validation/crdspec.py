"""The parts of a CRD's spec that apiextensions validation (Kubernetes 1.32) checks outside
its schemas: names, printer columns, subresources, selectable fields, the deprecation
warning of a version and the conversion strategy (with its webhook).

Input: decoded fields of the internal CRD (`definition` builds it from the v1 object);
output: field errors, each function in the API server's order. Pure.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from probemarker.sim.crd.gotext import gorepr
from probemarker.sim.crd.gotext.fielderr import FieldError
from probemarker.sim.crd.gotext.gorepr import invalid_rendered
from probemarker.sim.crd.schema import meta
from probemarker.sim.crd.schema.cel.fieldpath import path_text, valid_field_path
from probemarker.sim.crd.validation.newstructural import new_structural_error

__all__ = [
    "dns1035_label",
    "selectable_fields_errors",
    "validate_columns",
    "validate_conversion",
    "validate_deprecation",
    "validate_names",
    "validate_selectable_fields",
    "validate_subresources",
]

_DNS1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_COLUMN_TYPES = "boolean,date,integer,number,string"
_COLUMN_FORMATS = "byte,date,date-time,double,float,int32,int64,password"
_MAX_SELECTABLE = 8
_URL_FORM = "; desired format: https://host[/path]"


def dns1035_label(value: str) -> list[str]:
    """validation.IsDNS1035Label."""
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not re.fullmatch(_DNS1035, value):
        errors.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
            "start with an alphabetic character, and end with an alphanumeric character "
            f"(e.g. 'my-name',  or 'abc-123', regex used for validation is '{_DNS1035}')"
        )
    return errors


def validate_names(names: Mapping[str, Any], path: str) -> list[FieldError]:
    """ValidateCustomResourceDefinitionNames."""
    errors: list[FieldError] = []
    for key in ("plural", "singular"):
        value = str(names.get(key) or "")
        if value and (problems := dns1035_label(value)):
            errors.append(FieldError.invalid(f"{path}.{key}", value, ",".join(problems)))
    for key in ("kind", "listKind"):
        value = str(names.get(key) or "")
        if value and (problems := dns1035_label(value.lower())):
            detail = "may have mixed case, but should otherwise match: " + ",".join(problems)
            errors.append(FieldError.invalid(f"{path}.{key}", value, detail))
    for index, short in enumerate(names.get("shortNames") or ()):
        if problems := dns1035_label(short):
            errors.append(
                FieldError.invalid(f"{path}.shortNames[{index}]", short, ",".join(problems))
            )
    kind = names.get("kind") or ""
    if kind and kind == names.get("listKind"):
        errors.append(
            FieldError.invalid(f"{path}.listKind", kind, "kind and listKind may not be the same")
        )
    for index, category in enumerate(names.get("categories") or ()):
        if problems := dns1035_label(category):
            errors.append(
                FieldError.invalid(f"{path}.categories[{index}]", category, ",".join(problems))
            )
    return errors


def _simple_json_path(value: str, path: str) -> list[FieldError]:
    if not value:
        return [FieldError.invalid(path, value, "must not be empty")]
    if not value.startswith("."):
        return [FieldError.invalid(path, value, "must be a simple json path starting with .")]
    return []


def validate_columns(columns: Sequence[Mapping[str, Any]] | None, path: str) -> list[FieldError]:
    """ValidateCustomResourceColumnDefinition for each printer column."""
    errors: list[FieldError] = []
    for index, column in enumerate(columns or ()):
        at = f"{path}[{index}]"
        if not column.get("name"):
            errors.append(FieldError.required(f"{at}.name"))
        kind = str(column.get("type") or "")
        if not kind:
            errors.append(FieldError.required(f"{at}.type", f"must be one of {_COLUMN_TYPES}"))
        elif kind not in _COLUMN_TYPES.split(","):
            errors.append(FieldError.invalid(f"{at}.type", kind, f"must be one of {_COLUMN_TYPES}"))
        fmt = str(column.get("format") or "")
        if fmt and fmt not in _COLUMN_FORMATS.split(","):
            errors.append(
                FieldError.invalid(f"{at}.format", fmt, f"must be one of {_COLUMN_FORMATS}")
            )
        json_path = str(column.get("jsonPath") or "")
        if not json_path:
            errors.append(FieldError.required(f"{at}.JSONPath"))
        else:
            errors += _simple_json_path(json_path, f"{at}.JSONPath")
    return errors


def validate_subresources(subresources: Mapping[str, Any] | None, path: str) -> list[FieldError]:
    """ValidateCustomResourceDefinitionSubresources: the scale paths."""
    scale = (subresources or {}).get("scale")
    if not isinstance(scale, Mapping):
        return []
    errors: list[FieldError] = []
    for key, prefix in (("specReplicasPath", ".spec."), ("statusReplicasPath", ".status.")):
        value, at = str(scale.get(key) or ""), f"{path}.scale.{key}"
        if not value:
            errors.append(FieldError.required(at))
        elif problems := _simple_json_path(value, at):
            errors += problems
        elif not value.startswith(prefix):
            detail = f"should be a json path under {prefix.rstrip('.')}"
            errors.append(FieldError.invalid(at, value, detail))
    selector = scale.get("labelSelectorPath")
    if selector:
        at = f"{path}.scale.labelSelectorPath"
        if problems := _simple_json_path(selector, at):
            errors += problems
        elif not selector.startswith((".spec.", ".status.")):
            detail = "should be a json path under either .spec or .status"
            errors.append(FieldError.invalid(at, selector, detail))
    return errors


def validate_deprecation(version: Mapping[str, Any], path: str) -> list[FieldError]:
    """validateDeprecationWarning."""
    warning = version.get("deprecationWarning")
    where = f"{path}.deprecationWarning"
    if not version.get("deprecated") and warning is not None:
        return [FieldError.invalid(where, warning, "can only be set for deprecated versions")]
    if warning is None:
        return []
    problems = []
    if len(warning.encode()) > 256:
        problems.append("must be <= 256 characters long")
    if not warning:
        problems.append("must not be an empty string")
    for index, ch in enumerate(warning):
        offset = len(warning[:index].encode())
        if not ch.isprintable():
            problems.append(
                "must only contain printable UTF-8 characters; non-printable character found "
                f"at index {offset}"
            )
            break
    return [FieldError.invalid(where, warning, problem) for problem in problems]


def validate_selectable_fields(
    fields: Sequence[Mapping[str, Any]], schema: Mapping[str, Any] | None, path: str
) -> list[FieldError]:
    """ValidateCustomResourceSelectableFields."""
    errors: list[FieldError] = []
    unique: set[str] = set()
    for index, selectable in enumerate(fields):
        at = f"{path}[{index}].jsonPath"
        json_path = str(selectable.get("jsonPath") or "")
        if not json_path:
            errors.append(FieldError.required(at))
            continue
        try:
            steps, found = valid_field_path(json_path, schema, allow_array=False)
        except ValueError as exc:
            errors.append(FieldError.invalid(at, json_path, f"is an invalid path: {exc}"))
            continue
        if steps and steps[0][0] == "metadata":
            errors.append(FieldError.invalid(at, json_path, "must not point to fields in metadata"))
        if not isinstance(found, Mapping) or found.get("type") not in (
            "string",
            "boolean",
            "integer",
        ):
            detail = (
                "must point to a field of type string, boolean or integer. Enum string fields "
                "and strings with formats are allowed."
            )
            errors.append(FieldError.invalid(at, json_path, detail))
        text = path_text(steps)
        if text in unique:
            errors.append(FieldError.duplicate(at, json_path))
        unique.add(text)
    if len(unique) > _MAX_SELECTABLE:
        errors.append(FieldError.too_many(path, len(unique), _MAX_SELECTABLE))
    return errors


def selectable_fields_errors(
    fields: Sequence[Mapping[str, Any]] | None,
    validation: Mapping[str, Any] | None,
    path: str,
    *,
    schema_path: str,
    per_version: bool,
) -> list[FieldError]:
    """The selectableFields checks of a version (`per_version`) or of the spec: both need a
    schema (the spec's check only looks for spec.validation)."""
    if not fields:
        return []
    schema = validation.get("openAPIV3Schema") if isinstance(validation, Mapping) else None
    if per_version and schema is None:
        detail = (
            "selectableFields may only be set when version.schema.openAPIV3Schema is not included"
        )
        return [FieldError.invalid(path, "", detail)]
    if validation is None:
        detail = "selectableFields may only be set when validations.schema is included"
        return [FieldError.invalid(path, "", detail)]
    errors: list[FieldError] = []
    if isinstance(schema, Mapping) and (problem := new_structural_error(schema)) is not None:
        errors.append(FieldError.invalid(schema_path, "", problem))
        schema = None
    return errors + validate_selectable_fields(fields, schema, path)


def validate_conversion(conversion: Mapping[str, Any] | None, path: str) -> list[FieldError]:
    """validateCustomResourceConversion on the internal form (strategy, webhookClientConfig,
    conversionReviewVersions); the CA bundle is not parsed."""
    if conversion is None:
        return []
    strategy = str(conversion.get("strategy") or "")
    errors: list[FieldError] = []
    if not strategy:
        errors.append(FieldError.required(f"{path}.strategy"))
    elif strategy not in ("None", "Webhook"):
        errors.append(FieldError.not_supported(f"{path}.strategy", strategy, ["None", "Webhook"]))
    config = conversion.get("webhookClientConfig")
    versions = conversion.get("conversionReviewVersions")
    if strategy != "Webhook":
        detail = "should not be set when strategy is not set to Webhook"
        if config is not None:
            errors.append(FieldError.forbidden(f"{path}.webhookClientConfig", detail))
        if versions:
            errors.append(FieldError.forbidden(f"{path}.conversionReviewVersions", detail))
        return errors
    errors += _client_config(config, f"{path}.webhookClientConfig")
    return errors + _review_versions(versions, f"{path}.conversionReviewVersions")


def _client_config(config: Mapping[str, Any] | None, path: str) -> list[FieldError]:
    if config is None:
        return [FieldError.required(path, "required when strategy is set to Webhook")]
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [FieldError.required(path, "exactly one of url or service is required")]
    if url is not None:
        return _webhook_url(str(url), f"{path}.url")
    return _webhook_service(service or {}, f"{path}.service")


def _webhook_url(url: str, path: str) -> list[FieldError]:
    parts = urllib.parse.urlsplit(url)
    errors: list[FieldError] = []
    if parts.scheme != "https":
        errors.append(
            FieldError.invalid(
                path, parts.scheme, "'https' is the only allowed URL scheme" + _URL_FORM
            )
        )
    host = parts.netloc.rpartition("@")[2]
    if not host:
        errors.append(FieldError.invalid(path, host, "host must be specified" + _URL_FORM))
    if "@" in parts.netloc:
        user = parts.netloc.rpartition("@")[0]
        errors.append(
            FieldError.invalid(path, user, "user information is not permitted in the URL")
        )
    if parts.fragment:
        errors.append(
            FieldError.invalid(path, parts.fragment, "fragments are not permitted in the URL")
        )
    if parts.query:
        errors.append(
            FieldError.invalid(path, parts.query, "query parameters are not permitted in the URL")
        )
    return errors


def _webhook_service(service: Mapping[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if not service.get("name"):
        errors.append(FieldError.required(f"{path}.name", "service name is required"))
    if not service.get("namespace"):
        errors.append(FieldError.required(f"{path}.namespace", "service namespace is required"))
    port = service.get("port", 443)
    if not 1 <= port <= 65535:
        detail = "port is not valid: must be between 1 and 65535, inclusive"
        errors.append(FieldError.invalid(f"{path}.port", port, detail))
    url_path = service.get("path")
    if url_path is None or url_path in ("", "/"):
        return errors
    at = f"{path}.path"
    if url_path == "//":
        return [*errors, FieldError.invalid(at, url_path, "segment[0] may not be empty")]
    if not url_path.startswith("/"):
        errors.append(FieldError.invalid(at, url_path, "must start with a '/'"))
    steps = url_path[1:].removesuffix("/").split("/")
    for index, step in enumerate(steps):
        if not step:
            errors.append(FieldError.invalid(at, url_path, f"segment[{index}] may not be empty"))
            continue
        for failure in meta.dns1123_subdomain(step):
            errors.append(FieldError.invalid(at, url_path, f"segment[{index}]: {failure}"))
    return errors


def _review_versions(versions: Sequence[str] | None, path: str) -> list[FieldError]:
    if not versions:
        return [FieldError.required(path)]
    errors: list[FieldError] = []
    seen: set[str] = set()
    for index, version in enumerate(versions):
        if version in seen:
            errors.append(FieldError.invalid(f"{path}[{index}]", version, "duplicate version"))
            continue
        seen.add(version)
        errors += [
            FieldError.invalid(f"{path}[{index}]", version, p) for p in dns1035_label(version)
        ]
    if not seen & {"v1", "v1beta1"}:
        detail = "must include at least one of v1, v1beta1"
        errors.append(invalid_rendered(path, gorepr.strings(list(versions)), detail))
    return errors
