"""Typed, immutable PodProbeMarker objects.

Stage: api (pure). Built only by `parse.parse_marker`, which validates first, so every
instance here satisfies the rules in `rules.py`: timing fields carry the kubelet
defaults, exactly one handler is set, and no probe reaches a host other than the pod.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, Literal

from probemarker.api import rules
from probemarker.api.template import uses_result

_EMPTY: Mapping[str, str] = MappingProxyType({})


class ProbeState(enum.StrEnum):
    """A decided probe result, as markerPolicy[].state names it."""

    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True, order=True)
class MarkerRef:
    """Identity of a marker: namespace/name."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ExecAction:
    kind: ClassVar[str] = rules.EXEC  # the probe field that holds it (api/rules.py)
    command: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HTTPHeader:
    name: str
    value: str


@dataclass(frozen=True, slots=True)
class HTTPGetAction:
    kind: ClassVar[str] = rules.HTTP_GET
    port: int | str
    path: str = "/"
    scheme: Literal["HTTP", "HTTPS"] = "HTTP"
    headers: tuple[HTTPHeader, ...] = ()


@dataclass(frozen=True, slots=True)
class TCPSocketAction:
    kind: ClassVar[str] = rules.TCP_SOCKET
    port: int | str


@dataclass(frozen=True, slots=True)
class GRPCAction:
    kind: ClassVar[str] = rules.GRPC
    port: int
    service: str | None = None


# A probe kind is named once, in api/rules.py: its action's `kind`.
Handler = ExecAction | HTTPGetAction | TCPSocketAction | GRPCAction


@dataclass(frozen=True, slots=True)
class Timing:
    """Probe timing, in the kubelet's terms and with its defaults."""

    initial_delay_seconds: int = 0
    timeout_seconds: int = 1
    period_seconds: int = 10
    success_threshold: int = 1
    failure_threshold: int = 3


@dataclass(frozen=True, slots=True)
class MarkerPolicy:
    """What to put on the pod when a probe is decided in `state`."""

    state: ProbeState
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class ProbeSpec:
    """One entry of spec.probes[]."""

    name: str
    container_name: str
    handler: Handler
    timing: Timing
    policies: tuple[MarkerPolicy, ...] = ()
    condition_type: str | None = None

    def policy_for(self, state: ProbeState) -> MarkerPolicy | None:
        return next((p for p in self.policies if p.state is state), None)

    @property
    def uses_result(self) -> bool:
        """Whether a policy value holds `{{.Result}}` (api/template.py): only then does
        the probe's answer count towards what it publishes."""
        return any(
            uses_result(value)
            for policy in self.policies
            for value in (*policy.labels.values(), *policy.annotations.values())
        )


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    match_labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    match_expressions: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class Marker:
    """A validated PodProbeMarker."""

    ref: MarkerRef
    api_version: str
    selector: LabelSelector
    probes: tuple[ProbeSpec, ...]
    uid: str = ""
    generation: int = 0
    resource_version: str = ""

    def probe(self, name: str) -> ProbeSpec | None:
        return next((p for p in self.probes if p.name == name), None)


def frozen_mapping(values: Mapping[str, str]) -> Mapping[str, str]:
    """A read-only copy, so model objects stay immutable."""
    return MappingProxyType(dict(values)) if values else _EMPTY
