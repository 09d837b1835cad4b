"""Split YAML/JSON text into Kubernetes object documents.

Stage: api (pure: text in, documents out). Multi-document YAML, `kind: List`
wrappers (as `kubectl get -o yaml` writes them) are unrolled, empty documents are
skipped, values become what kubectl would send as JSON (scalar keys such as
`8080:` become strings, unquoted dates stay text, as sigs.k8s.io/yaml does), and
duplicate keys are an error (as in kubectl's strict decoding), because
silently keeping the last of two `periodSeconds` hides a mistake.

`other_object` tells a document of another kind (a Deployment, Service, CRD... in
kustomize build output) from one that is, or tries to be, a PodProbeMarker, so that
callers skip the first and validate the second.
"""

from __future__ import annotations

import datetime
import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from probemarker.api import rules
from probemarker.kit.printable import printable


class DocumentError(ValueError):
    """The text is not YAML: `where` says the document and position."""


@dataclass(frozen=True, slots=True)
class Document:
    """One object from a file; `where` locates it, e.g. `document 2` or `document 1, items[3]`."""

    where: str
    body: Any


@dataclass(frozen=True, slots=True)
class OtherObject:
    """A well-formed Kubernetes object that is not a PodProbeMarker: `kind`, `name`
    (namespace/name, or `<unnamed>`) and `api_version`, made safe to print."""

    kind: str
    name: str
    api_version: str


# Groups that serve PodProbeMarker: in probemarker.io it is the only kind, so any other
# kind there is a mistake; Kruise's group has other kinds (CloneSet, ...) to skip.
_OWN_GROUP = rules.GROUP
# A kind this close to "PodProbeMarker" is taken for a misspelling and validated (so the
# validator names the `kind` field), not skipped.
_TYPO_RATIO = 0.8


def other_object(body: Any) -> OtherObject | None:
    """The document as an `OtherObject` when it is a Kubernetes object of another kind
    (both `apiVersion` and `kind` set, kind not PodProbeMarker or a misspelling of it,
    group not probemarker.io); None when it should be validated as a PodProbeMarker."""
    if not isinstance(body, Mapping):
        return None
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if not (isinstance(api_version, str) and api_version and isinstance(kind, str) and kind):
        return None
    group = api_version.rpartition("/")[0]
    if group == _OWN_GROUP or _looks_like_marker(kind):
        return None
    return OtherObject(
        kind=printable(kind), name=printable(_object_name(body)), api_version=printable(api_version)
    )


def _looks_like_marker(kind: str) -> bool:
    ratio = difflib.SequenceMatcher(None, kind.lower(), rules.KIND.lower()).ratio()
    return ratio >= _TYPO_RATIO


def _object_name(body: Mapping[str, Any]) -> str:
    meta = body.get("metadata")
    if not isinstance(meta, Mapping):
        return "<unnamed>"
    name, namespace = meta.get("name") or meta.get("generateName"), meta.get("namespace")
    name = name if isinstance(name, str) and name else "<unnamed>"
    return f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys in a mapping."""


def _construct_mapping(
    loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False
) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key (a list as key): let the validator report it
            continue
        if duplicate:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_documents(text: str) -> Iterator[Document]:
    """Each object in `text`, in order; raises DocumentError on YAML syntax errors."""
    try:
        raw = list(yaml.load_all(text, Loader=_StrictLoader))  # _StrictLoader is a SafeLoader
    except yaml.YAMLError as exc:
        raise DocumentError(_describe_yaml_error(exc)) from None
    for number, loaded in enumerate(raw, start=1):
        body = as_json(loaded)
        if body is None:
            continue
        if _is_list(body):
            for i, item in enumerate(body.get("items") or ()):
                yield Document(f"document {number}, items[{i}]", item)
        else:
            yield Document(f"document {number}", body)


def as_json(value: Any) -> Any:
    """A YAML value as the JSON kubectl would send: string keys, no dates."""
    if isinstance(value, Mapping):
        return {_json_key(k): as_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_json(v) for v in value]
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


def _json_key(key: Any) -> Any:
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int | float):
        return str(key)
    if key is None:
        return "null"
    return key  # str, or a list/map used as key: the validator reports it


def _is_list(body: Any) -> bool:
    return (
        isinstance(body, Mapping)
        and isinstance(body.get("kind"), str)
        and body["kind"].endswith("List")
        and isinstance(body.get("items"), list)
    )


def _describe_yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"not valid YAML: line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return f"not valid YAML: {problem}"
