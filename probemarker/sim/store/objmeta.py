"""Object helpers shared by the store: JSON copies, timestamps, names, pruning.

``prune_empty`` reproduces what a client sees of a typed Kubernetes object after the
API server's round trip through Go structs: ``omitempty`` drops nulls and empty lists
everywhere, empty maps where the Go field is a map (labels, annotations, nodeSelector,
resource lists, ...), and ``""``/``false`` in the common ``omitempty`` string and bool
fields (a condition's ``reason``/``message``, ``hostNetwork``, ...). Empty structs
(``securityContext: {}``) survive, as they do on a real server; the contents of map
fields are kept verbatim (an annotation may well be ``""``). Custom resources are
stored as given and never pruned.

Invariants: every function here is pure; ``prune_empty`` and ``copy_json`` return new
containers and never mutate their input.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from probemarker.sim.errors import StatusCause

__all__ = ["copy_json", "format_time", "name_causes", "parse_time", "prune_empty"]

# Go map-typed fields of the core kinds the sim serves (their {} is dropped by omitempty).
MAP_FIELDS = frozenset(
    {
        "labels", "annotations", "nodeSelector", "limits", "requests", "overhead", "data",
        "binaryData", "stringData", "capacity", "allocatable", "matchLabels", "allocatedResources",
        "selector", "parameters", "volumeAttributes", "attributes",
    }
)  # fmt: skip
# String fields that are ``omitempty`` wherever they occur in the sim's core kinds
# (PodCondition/PodStatus/ContainerState*/Event reason and message, ...); an empty
# value never reaches a client.
OMITEMPTY_STRINGS = frozenset(
    {
        "reason", "message", "phase", "qosClass", "nominatedNodeName", "hostIP", "podIP",
        "containerID", "generateName", "workingDir", "nodeName", "serviceAccountName",
    }
)  # fmt: skip
OMITEMPTY_BOOLS = frozenset(
    {"hostNetwork", "hostPID", "hostIPC", "stdin", "stdinOnce", "tty", "unschedulable"}
)


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars), faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def _prune(value: Any, key: str | None) -> tuple[bool, Any]:
    """(keep?, pruned value) of the field ``key`` (None for list items and the root)."""
    if value is None:
        return False, None
    if isinstance(value, dict):
        if key in MAP_FIELDS:
            return bool(value), dict(value)
        out = {}
        for k, v in value.items():
            keep, pv = _prune(v, k)
            if keep:
                out[k] = pv
        return True, out
    if isinstance(value, list):
        if not value:
            return False, value
        return True, [_prune(v, None)[1] if v is not None else None for v in value]
    if value == "" and key in OMITEMPTY_STRINGS:
        return False, value
    if value is False and key in OMITEMPTY_BOOLS:
        return False, value
    return True, value


def prune_empty(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without null values, empty lists and empty map-typed fields (Go omitempty)."""
    _, out = _prune(obj, None)
    assert isinstance(out, dict)
    return out


def format_time(when: datetime) -> str:
    """metav1.Time's RFC 3339 form, UTC, whole seconds."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def name_causes(name: str, *, namespace_like: bool) -> list[StatusCause]:
    """ValidateObjectMeta's name checks: a DNS-1123 label for namespaces, a DNS-1123
    subdomain otherwise."""
    if not name:
        return [
            StatusCause(
                "FieldValueRequired",
                "Required value: name or generateName is required",
                "metadata.name",
            )
        ]
    errs = []
    limit, regex, msg = (63, _DNS1123_LABEL, _LABEL_MSG) if namespace_like else (
        253, _DNS1123_SUBDOMAIN, _SUBDOMAIN_MSG,
    )  # fmt: skip
    if len(name) > limit:
        errs.append(f"must be no more than {limit} characters")
    if not regex.fullmatch(name):
        errs.append(msg)
    if not errs:
        return []
    quoted = '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return [
        StatusCause(
            "FieldValueInvalid", f"Invalid value: {quoted}: {'; '.join(errs)}", "metadata.name"
        )
    ]
