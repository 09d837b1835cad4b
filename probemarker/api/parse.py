"""Turn a PodProbeMarker document into a `Marker`, applying the kubelet defaults.

Stage: api (pure). `parse_marker` validates first and raises `InvalidMarker` with
every problem at once, so callers never see a half-built model. The daemon calls it
on objects from the API server (already defaulted by the CRD schema); the CLI calls
it on files (not defaulted), so defaults are applied here as well.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

from probemarker.api import rules
from probemarker.api.fields import FieldError
from probemarker.api.model import (
    ExecAction,
    GRPCAction,
    Handler,
    HTTPGetAction,
    HTTPHeader,
    LabelSelector,
    Marker,
    MarkerPolicy,
    MarkerRef,
    ProbeSpec,
    ProbeState,
    SelectorRequirement,
    TCPSocketAction,
    Timing,
    frozen_mapping,
)
from probemarker.api.validation import validate_marker


class InvalidMarker(ValueError):
    """A PodProbeMarker that breaks the rules; `errors` lists every problem."""

    def __init__(self, ref: str, errors: Sequence[FieldError]) -> None:
        self.ref = ref
        self.errors = tuple(errors)
        lines = "; ".join(str(e) for e in self.errors)
        super().__init__(f"PodProbeMarker {ref} is invalid: {lines}")


def marker_ref_text(doc: Any) -> str:
    """namespace/name of a document, as well as it can be told, for messages."""
    meta = doc.get("metadata") if isinstance(doc, Mapping) else None
    if not isinstance(meta, Mapping):
        return "<unnamed>"
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def parse_marker(doc: Any, *, default_namespace: str = "default") -> Marker:
    """A validated, defaulted `Marker`, or `InvalidMarker` with every problem."""
    errors = validate_marker(doc)
    if errors:
        raise InvalidMarker(marker_ref_text(doc), errors)
    meta: Mapping[str, Any] = doc["metadata"]
    spec: Mapping[str, Any] = doc["spec"]
    return Marker(
        ref=MarkerRef(
            namespace=meta.get("namespace") or default_namespace,
            name=meta.get("name") or meta.get("generateName", ""),
        ),
        api_version=doc["apiVersion"],
        selector=_selector(spec["selector"]),
        probes=tuple(_probe(p) for p in spec["probes"]),
        uid=str(meta.get("uid", "")),
        generation=int(meta.get("generation", 0) or 0),
        resource_version=str(meta.get("resourceVersion", "")),
    )


def _selector(raw: Mapping[str, Any]) -> LabelSelector:
    expressions = tuple(
        SelectorRequirement(
            key=e["key"],
            operator=cast(Literal["In", "NotIn", "Exists", "DoesNotExist"], e["operator"]),
            values=tuple(e.get("values") or ()),
        )
        for e in raw.get("matchExpressions") or ()
    )
    return LabelSelector(
        match_labels=frozen_mapping(raw.get("matchLabels") or {}),
        match_expressions=expressions,
    )


def _probe(raw: Mapping[str, Any]) -> ProbeSpec:
    spec: Mapping[str, Any] = raw["probe"]
    timing = Timing(
        **{
            _snake(field): int(spec.get(field, default))
            for field, default in rules.TIMING_DEFAULTS.items()
        }
    )
    return ProbeSpec(
        name=raw["name"],
        container_name=raw["containerName"],
        handler=_handler(spec),
        timing=timing,
        policies=tuple(
            MarkerPolicy(
                state=ProbeState(p["state"]),
                labels=frozen_mapping(p.get("labels") or {}),
                annotations=frozen_mapping(p.get("annotations") or {}),
            )
            for p in raw.get("markerPolicy") or ()
        ),
        condition_type=raw.get("podConditionType"),
    )


def _handler(spec: Mapping[str, Any]) -> Handler:
    if ExecAction.kind in spec:
        return ExecAction(command=tuple(spec[ExecAction.kind]["command"]))
    if HTTPGetAction.kind in spec:
        http = spec[HTTPGetAction.kind]
        return HTTPGetAction(
            port=_port(http["port"]),
            path=http.get("path") or rules.HTTP_PATH_DEFAULT,
            scheme=cast(Literal["HTTP", "HTTPS"], http.get("scheme") or rules.HTTP_SCHEME_DEFAULT),
            headers=tuple(HTTPHeader(h["name"], h["value"]) for h in http.get("httpHeaders") or ()),
        )
    if TCPSocketAction.kind in spec:
        return TCPSocketAction(port=_port(spec[TCPSocketAction.kind]["port"]))
    grpc = spec[GRPCAction.kind]
    return GRPCAction(port=int(grpc["port"]), service=grpc.get("service"))


def _port(value: int | float | str) -> int | str:
    return value if isinstance(value, str) else int(value)


def _snake(field: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in field)
