"""Which marker `probemarker check` runs, and where its namespace came from: a file's
(`-f`, validated as `probemarker validate` does) or the cluster's (`--marker NS/NAME`,
validated as the daemon does).

Stage: edge (reads a file, or GETs the marker). Input: the `-f` path (`-` for stdin),
--namespace, --marker, the connection (its namespace, for a file without
`metadata.namespace`). Output: the `Marker` and where its namespace came from (for
the report); the validation messages on `err`; `UsageError` (exit 2) for what cannot
be used, naming the flag and the fix.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from probemarker.api import rules
from probemarker.api.model import Marker
from probemarker.api.parse import InvalidMarker
from probemarker.kube.connect.config import Connection
from probemarker.kube.connect.errors import ApiNotFound

__all__ = [
    "MarkerFile",
    "UsageError",
    "file_namespace",
    "marker_from_cluster",
    "marker_to_check",
    "read_marker_file",
    "split_ref",
]


class UsageError(Exception):
    """A problem with the command line or its input: printed, exit 2."""


def split_ref(text: str, what: str) -> tuple[str, str]:
    """`NS/NAME` -> (NS, NAME); UsageError naming the flag otherwise."""
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise UsageError(f"{what} {text!r}: expected NAMESPACE/NAME, for example default/web-0")
    return namespace, name


@dataclass(frozen=True, slots=True)
class MarkerFile:
    """The one marker document of a file, validated; parsed once its namespace is
    known (`file_namespace`), which may take the connection's."""

    body: Mapping[str, Any]
    label: str  # the file, `<stdin>` for `-`
    namespace: str | None  # metadata.namespace, else --namespace; None: neither


def read_marker_file(path: str, namespace: str | None, *, err: TextIO) -> MarkerFile:
    """The one PodProbeMarker of `path` (`-`: stdin), validated as `probemarker validate`
    does, with its messages; UsageError when it cannot be used. A `metadata.namespace`
    that differs from `namespace` (--namespace) is an error, as `kubectl apply -f -n`."""
    from probemarker.api.documents import DocumentError, load_documents, other_object
    from probemarker.check.validate import validate_document

    label = "<stdin>" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else _read(path)
        documents = list(load_documents(text))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"-f {label}: cannot read: {exc}") from exc
    except DocumentError as exc:
        raise UsageError(f"{label}: {exc}") from exc
    markers = [d for d in documents if other_object(d.body) is None]
    if len(markers) != 1:
        raise UsageError(
            f"-f {label}: holds {len(markers)} PodProbeMarkers; check runs exactly one "
            "(put it in a file of its own, or use --marker NS/NAME)"
        )
    doc = markers[0]
    said = io.StringIO()  # `probemarker validate`'s lines, shown only when invalid
    if not validate_document(label, doc, out=said):
        err.write(said.getvalue())
        raise UsageError(f"{label}: the PodProbeMarker is invalid (messages above)")
    meta = doc.body.get("metadata") or {}
    own = meta.get("namespace")
    if own and namespace and own != namespace:
        raise UsageError(
            f"the namespace of the marker in {label} ({own}) does not match --namespace "
            f"{namespace}; drop --namespace or change metadata.namespace"
        )
    return MarkerFile(body=doc.body, label=label, namespace=own or namespace)


def file_namespace(marker: MarkerFile, connection: Connection) -> tuple[str, str]:
    """(namespace, where it came from) of a marker file, as `kubectl apply -f` chooses
    it: `metadata.namespace`, else --namespace, else the connection's (the kubeconfig
    context's namespace; in a pod, its own), else `default`."""
    from probemarker.api import names

    if marker.namespace is not None:
        own = (marker.body.get("metadata") or {}).get("namespace")
        return marker.namespace, (f"metadata.namespace in {marker.label}" if own else "--namespace")
    problems = names.dns1123_label_problems(connection.namespace)
    if problems:
        raise UsageError(
            f"-f {marker.label} sets no metadata.namespace, and the default namespace "
            f"{connection.namespace!r} ({connection.namespace_from}) {problems[0]}; pass "
            "--namespace NS or fix the namespace there"
        )
    return connection.namespace, connection.namespace_from


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


async def marker_from_cluster(client: Any, text: str, group: str, *, err: TextIO) -> Marker:
    """The marker NS/NAME as the API server holds it, validated as the daemon does."""
    from probemarker.kit.printable import printable
    from probemarker.watch.markers import marker_resource, read_marker

    namespace, name = split_ref(text, "--marker")
    resource = marker_resource(group)
    try:
        raw = await client.request(
            "GET", resource.path(namespace, name), info=resource.info("get", namespace, name)
        )
    except ApiNotFound as exc:
        raise UsageError(
            f"--marker {text}: PodProbeMarker {name} not found in namespace {namespace} "
            f"(group {group}; kubectl get ppm -A lists them; if none are listed, the CRD of "
            f"group {group} may not be installed)"
        ) from exc
    try:
        return read_marker(raw, api_version=f"{group}/{rules.VERSION}")
    except InvalidMarker as exc:
        for error in exc.errors:
            err.write(f"cluster: PodProbeMarker {printable(exc.ref)}: {printable(str(error))}\n")
        raise UsageError(
            f"--marker {text}: the PodProbeMarker is invalid (messages above)"
        ) from exc


async def marker_to_check(
    client: Any,
    text: str | None,
    marker_file: MarkerFile | None,
    connection: Connection,
    group: str,
    *,
    err: TextIO,
) -> tuple[Marker, str]:
    """The marker to check, and where its namespace came from: `marker_file`'s (its
    namespace as `file_namespace` chooses it), else the cluster's marker `text`
    (--marker NS/NAME)."""
    from probemarker.api.parse import parse_marker

    if marker_file is None:
        return await marker_from_cluster(client, text or "", group, err=err), "--marker"
    namespace, namespace_from = file_namespace(marker_file, connection)
    return parse_marker(marker_file.body, default_namespace=namespace), namespace_from
