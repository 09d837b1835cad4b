"""Builders shared by the write-stage tests: probe specs, decided results, pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probemarker.api.model import ExecAction, MarkerPolicy, ProbeSpec, ProbeState, Timing
from probemarker.identity.probes import OwnerRef
from probemarker.sim.store.objmeta import prune_empty
from probemarker.sim.store.patch import apply_json_patch
from probemarker.watch.pods import PodView, pod_projection, pod_view
from probemarker.write.desired import Decided
from probemarker.write.ownership import OWNED_KEY, Owned, render_record

S, F = ProbeState.SUCCEEDED, ProbeState.FAILED
NOW = "2026-11-23T10:00:00Z"
UID = "uid-1"  # of every pod raw_pod makes
EARLIER = "2026-11-23T09:00:00Z"


def owner(text: str) -> OwnerRef:
    return OwnerRef.parse(text)


def spec(
    *,
    name: str = "p",
    ok: Mapping[str, str] | None = None,
    bad: Mapping[str, str] | None = None,
    ok_annotations: Mapping[str, str] | None = None,
    bad_annotations: Mapping[str, str] | None = None,
    condition: str | None = None,
) -> ProbeSpec:
    """A probe spec: `ok`/`bad` are the Succeeded/Failed policies' labels."""
    policies = []
    if ok or ok_annotations:
        policies.append(
            MarkerPolicy(S, labels=dict(ok or {}), annotations=dict(ok_annotations or {}))
        )
    if bad or bad_annotations:
        policies.append(
            MarkerPolicy(F, labels=dict(bad or {}), annotations=dict(bad_annotations or {}))
        )
    return ProbeSpec(
        name=name,
        container_name="main",
        handler=ExecAction(("true",)),
        timing=Timing(),
        policies=tuple(policies),
        condition_type=condition,
    )


def decided(who: str, state: ProbeState, probe: ProbeSpec, message: str = "") -> Decided:
    return Decided(owner=owner(who), spec=probe, state=state, message=message)


def record_text(entries: Mapping[str, Owned]) -> str:
    text = render_record({owner(k): v for k, v in entries.items()}, pod_uid=UID)
    assert text is not None
    return text


def raw_pod(
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    record: Mapping[str, Owned] | None = None,
) -> dict[str, Any]:
    """A pod as the API server shows it; None (or empty) leaves a map or list out."""
    meta: dict[str, Any] = {"name": "pod", "namespace": "ns", "uid": UID}
    if record is not None:
        annotations = {**(annotations or {}), OWNED_KEY: record_text(record)}
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    status: dict[str, Any] = {"phase": "Running"}
    if conditions is not None:
        status["conditions"] = [dict(c) for c in conditions]
    pod = {"metadata": meta, "spec": {"containers": [{"name": "main"}]}, "status": status}
    return prune_empty(pod)  # as a client sees it: no empty maps, lists, reasons


def view(**kwargs: Any) -> PodView:
    return pod_view(pod_projection(raw_pod(**kwargs)))


def apply(pod: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """The sim's JSON patch, then the API server's omitempty round trip."""
    return prune_empty(apply_json_patch(pod, ops))


def condition(
    type_: str,
    status: str = "True",
    *,
    reason: str = "ProbeSucceeded",
    message: str = "",
    at: str = EARLIER,
    **extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": type_,
        "status": status,
        "lastProbeTime": at,
        "lastTransitionTime": at,
        "reason": reason,
    }
    if message:
        out["message"] = message
    out.update(extra)
    return out
