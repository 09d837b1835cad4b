"""What the daemon reads of a pod, in one room: the fields it keeps (`POD_FIELDS`), the
projection its informer and `check` keep of each pod (`pod_projection`), and the typed,
read-only view the stages read (`PodView`, `ContainerFacts`).

Stage: values (pure). Input: a pod projection (`pod_projection`: the fields of
`POD_FIELDS` and a summary of the annotations), or a whole pod as the API server sends
it (its annotations are summarized keeping no value). Output: `PodView` and
`ContainerFacts`. Every field is read defensively: a pod with no labels,
no annotations, no status or odd values (Kruise panicked on pods without labels,
kruise#2499/#2527) reads as empty, never raises. Timestamps are RFC 3339 strings from
the API server, parsed to Unix seconds.

Of the annotations the view has an `AnnotationSummary` (watch/annotations.py): of a
projection, the values of the ownership record's annotation (`OWNED_KEY`) and of the
keys the record names (`read_keys`: all the daemon ever reads values of), a
fingerprint of every annotation (whether a key carries a given value) and their total
size; never the other values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, NewType

import orjson

from probemarker.api import rules
from probemarker.kit.projection import (
    IDENTITY_FIELDS,
    KeepAnnotations,
    Projector,
    compile_fields,
    project,
)
from probemarker.watch.annotations import AnnotationSummary, summarize

PodUID = NewType("PodUID", str)

# What the probe engine reads of a pod: matching (labels, namespace), the probe
# target (containers and their ports, native sidecars among the init containers, the
# pod IP), the kubelet's view (phase, conditions, whether each container runs, since
# when, and which instance of it: state, started, containerID, restartCount) and what
# the writer needs to compute its patch (labels, annotations with its ownership
# record, all conditions). Everything else of a pod (env, volumes, managedFields,
# images and image IDs…) is dropped at the edge.
POD_FIELDS = (
    *IDENTITY_FIELDS,
    "metadata.labels",
    "metadata.annotations",
    "metadata.deletionTimestamp",
    "spec.nodeName",
    "spec.containers[].name",
    "spec.containers[].ports",
    "spec.initContainers[].name",
    "spec.initContainers[].ports",
    "spec.initContainers[].restartPolicy",
    "status.phase",
    "status.podIP",
    "status.conditions",
    *(
        f"status.{statuses}[].{field}"
        for statuses in ("containerStatuses", "initContainerStatuses")
        for field in ("name", "containerID", "ready", "started", "restartCount", "state")
    ),
)

_EMPTY: Mapping[str, Any] = MappingProxyType({})
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def parse_time(value: object) -> float | None:
    """Unix seconds of an RFC 3339 timestamp (`2026-01-02T03:04:05Z`), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class ContainerFacts:
    """What the kubelet reports of one container, as the prober reads it."""

    name: str
    container_id: str = ""  # empty: not created yet (the kubelet skips such probes)
    restart_count: int = 0
    running: bool = False
    started: bool = False  # status.started (startup probe passed, or none)
    started_at: float | None = None  # state.running.startedAt, Unix seconds
    ports: Mapping[str, int] = field(default_factory=lambda: _EMPTY)  # name -> number


@dataclass(frozen=True, slots=True)
class PodView:
    namespace: str
    name: str
    uid: PodUID
    labels: Mapping[str, str]
    annotations: AnnotationSummary
    phase: str
    deleting: bool
    pod_ip: str | None
    containers: Mapping[str, ContainerFacts]  # regular and restartable init containers
    conditions: tuple[Mapping[str, Any], ...]

    def condition(self, type_: str) -> Mapping[str, Any] | None:
        """The first condition of `type_`, as the API server holds it, or None."""
        return next((c for c in self.conditions if c.get("type") == type_), None)

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def active(self) -> bool:
        """Probes may run: not terminal and not being deleted (docs/engine.md)."""
        return not self.terminal and not self.deleting


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else _EMPTY


def _str_map(value: object) -> Mapping[str, str]:
    raw = _mapping(value)
    return MappingProxyType({k: v for k, v in raw.items() if isinstance(v, str)})


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _ports(container: Mapping[str, Any]) -> Mapping[str, int]:
    named: dict[str, int] = {}
    for port in _list(container.get("ports")):
        port = _mapping(port)
        name, number = port.get("name"), port.get("containerPort")
        if isinstance(name, str) and name and isinstance(number, int) and name not in named:
            named[name] = number
    return MappingProxyType(named)


def _facts(name: str, spec: Mapping[str, Any], status: Mapping[str, Any]) -> ContainerFacts:
    state = _mapping(status.get("state"))
    running = _mapping(state.get("running")) if "running" in state else None
    count = status.get("restartCount")
    container_id = status.get("containerID")
    return ContainerFacts(
        name=name,
        container_id=container_id if isinstance(container_id, str) else "",
        restart_count=count if isinstance(count, int) else 0,
        running=running is not None,
        started=status.get("started") is True,
        started_at=parse_time(running.get("startedAt")) if running is not None else None,
        ports=_ports(spec),
    )


def _containers(pod: Mapping[str, Any]) -> Mapping[str, ContainerFacts]:
    spec, status = _mapping(pod.get("spec")), _mapping(pod.get("status"))
    statuses: dict[str, Mapping[str, Any]] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for item in _list(status.get(key)):
            item = _mapping(item)
            if isinstance(item.get("name"), str):
                statuses[item["name"]] = item
    found: dict[str, ContainerFacts] = {}
    for container in _list(spec.get("initContainers")):
        container = _mapping(container)
        name = container.get("name")
        # Only native sidecars (restartPolicy Always) run beside the pod's containers.
        if isinstance(name, str) and container.get("restartPolicy") == "Always":
            found[name] = _facts(name, container, statuses.get(name, _EMPTY))
    for container in _list(spec.get("containers")):
        container = _mapping(container)
        name = container.get("name")
        if isinstance(name, str):
            found[name] = _facts(name, container, statuses.get(name, _EMPTY))
    return MappingProxyType(found)


def _annotations(meta: Mapping[str, Any]) -> AnnotationSummary:
    found = meta.get("annotations")
    if isinstance(found, AnnotationSummary):
        return found
    # A whole pod: fingerprints and sizes, no value (view `pod_projection(pod)` to keep
    # the values the daemon reads).
    return summarize(found)


def pod_view(pod: Mapping[str, Any]) -> PodView:
    """The engine's view of a pod projection; never raises on odd input."""
    meta, status = _mapping(pod.get("metadata")), _mapping(pod.get("status"))
    phase, ip = status.get("phase"), status.get("podIP")
    return PodView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=PodUID(str(meta.get("uid") or "")),
        labels=_str_map(meta.get("labels")),
        annotations=_annotations(meta),
        phase=phase if isinstance(phase, str) else "",
        deleting=meta.get("deletionTimestamp") is not None,
        pod_ip=ip if isinstance(ip, str) and ip else None,
        containers=_containers(pod),
        conditions=tuple(c for c in _list(status.get("conditions")) if isinstance(c, Mapping)),
    )


def pod_projector(keep: KeepAnnotations) -> Projector:
    """The projection of a pod: POD_FIELDS, and at `metadata.annotations` the summary
    of its annotations keeping the values of the keys `keep(metadata)` names, not the
    map: a pod's annotations are often most of its size (32 KiB of them on each of 500
    pods made the daemon's store most of its memory, issue 22). The daemon's own is
    `pod_projection` (`keep`: `read_keys`)."""
    spec = compile_fields(POD_FIELDS)

    def apply(obj: Mapping[str, Any]) -> dict[str, Any]:
        out = project(obj, spec)
        meta = obj.get("metadata")
        if type(meta) is dict and "metadata" in out:
            out["metadata"]["annotations"] = summarize(meta.get("annotations"), keep(meta))
        return out

    return apply


# The annotation the ownership record lives in (write/ownership.py says what it holds),
# its member that names the pod it was written for, and the most of it that is parsed.
# The daemon reads the values of this annotation and of the keys the record names.
OWNED_KEY: Final = f"{rules.GROUP}/owned"
UID_MEMBER: Final = "#uid"  # never an owner: an owner's marker name is not empty
RECORD_PARSE_LIMIT: Final = rules.TOTAL_ANNOTATION_BYTES


def read_keys(metadata: Mapping[str, Any]) -> tuple[str, ...]:
    """The annotation keys whose values the daemon reads on the pod with this
    `metadata`: the record's own key, and every annotation key its record names for
    this pod (a superset of what `parse_record` accepts: an entry is not validated
    here). The pod projection keeps these values and only fingerprints of the rest
    (watch/annotations.py): the ownership rule (write/ours.py) reads values only to check
    that a recorded key still holds what was written, and the record names all of those."""
    annotations = metadata.get("annotations")
    text = annotations.get(OWNED_KEY) if isinstance(annotations, dict) else None
    if not isinstance(text, str) or len(text) > RECORD_PARSE_LIMIT:
        return (OWNED_KEY,)
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError:
        return (OWNED_KEY,)
    if not isinstance(raw, dict) or raw.get(UID_MEMBER) != metadata.get("uid"):
        return (OWNED_KEY,)  # not trusted: parse_record reads nothing of it
    keys = {OWNED_KEY}
    for entry in raw.values():
        written = entry.get("a") if isinstance(entry, dict) else None
        if isinstance(written, dict):
            keys.update(k for k in written if isinstance(k, str))
    return tuple(sorted(keys))


pod_projection: Projector = pod_projector(read_keys)
"""What the daemon keeps of a pod (its informer's projection, and what `check` reads):
`watch.pods.POD_FIELDS`, and of the annotations the values of this record and of
the keys it names (`read_keys`), fingerprints of the rest."""
