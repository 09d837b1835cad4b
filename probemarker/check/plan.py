"""What `probemarker check` would have the daemon do with one run's outcomes.

Stage: decide -> write, for a dry run (pure). Input: a pod (`PodView`), the marker
under check, each matched probe's outcome. Output: the pod's selection (or why it is
not probed), how each probe is reached from here, and the `DesiredPod` and JSON patch
the daemon would send. The daemon's own functions do the work: `match.match_pod`,
`decide.gate`, `write.desired.desired_state`, `write.patch.build_patch`.

The daemon publishes a state only after successThreshold / failureThreshold
consecutive results; check runs each probe once, so the patch is what the daemon
would write *if this outcome were the decided one*. Unknown outcomes are never decided
(docs/engine.md), so they change nothing on the pod, as in the daemon.

Other owners recorded on the pod: every marker other than the one under check is
passed to `desired_state` as *frozen* (its keys stay as they are, unchanged and not
removed), so check never proposes removing another marker's labels because it does
not know that marker: it shows the change this marker makes, no more. The marker's
own recorded probes that its spec no longer has are departed, and their clean-up is
in the patch, as the daemon would do it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from probemarker.api.model import (
    ExecAction,
    Handler,
    HTTPGetAction,
    LabelSelector,
    Marker,
    ProbeSpec,
    Timing,
)
from probemarker.api.template import render, uses_result
from probemarker.decide.decide import Gate, gate, not_running, result_of, state_of
from probemarker.identity.probes import OwnerRef, ProbeKey
from probemarker.match.match import match_pod, selector_matches
from probemarker.probe.outcome import Outcome, Result
from probemarker.watch.pods import ContainerFacts, PodView
from probemarker.write.desired import Decided, DesiredPod, desired_state
from probemarker.write.ownership import OWNED_KEY, parse_record
from probemarker.write.patch import build_patch

__all__ = [
    "VIA_DIRECT",
    "VIA_EXEC",
    "VIA_PROXY",
    "PodPlan",
    "decided_of",
    "not_reachable_message",
    "not_run",
    "plan_pod",
    "policy_values",
    "readiness_gates",
    "result_shown",
    "route",
    "selection_problem",
    "selector_text",
]

VIA_EXEC: Final = "pods/exec"
VIA_PROXY: Final = "the API server's pod proxy"
VIA_DIRECT: Final = "the pod IP"


def route(action: Handler, *, via_api_proxy: bool, direct: bool) -> str | None:
    """How a probe of `action` is run from here; None: it is not reachable from here.
    exec always goes through pods/exec; the network probes need the pod IP (`direct`,
    from inside the cluster), or for httpGet the API server's pod proxy."""
    if isinstance(action, ExecAction):
        return VIA_EXEC
    if direct:
        return VIA_DIRECT
    if via_api_proxy and isinstance(action, HTTPGetAction):
        return VIA_PROXY
    return None


def not_reachable_message(kind: str, *, via_api_proxy: bool) -> str:
    """Why a network probe was not run (see `route`)."""
    hint = (
        "--via-api-proxy sends only httpGet through the API server"
        if via_api_proxy
        else "--via-api-proxy sends an httpGet through the API server's pod proxy"
    )
    return (
        f"not reachable from here: {_article(kind)} {kind} probe connects to the pod IP, which is "
        f"reachable only from inside the cluster ({hint}; --direct, run inside the "
        "cluster, connects to the pod IP)"
    )


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiouh" else "a"


def selector_text(selector: LabelSelector) -> str:
    """The selector as `kubectl get -l` writes one."""
    parts = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
    for req in selector.match_expressions:
        if req.operator == "Exists":
            parts.append(req.key)
        elif req.operator == "DoesNotExist":
            parts.append(f"!{req.key}")
        else:
            parts.append(f"{req.key} {req.operator.lower()} ({','.join(req.values)})")
    return ",".join(parts)


def selection_problem(view: PodView, marker: Marker) -> str | None:
    """Why the daemon does not probe `view`'s pod for `marker`, or None when it does."""
    ref = marker.ref
    if view.namespace != ref.namespace:
        return (
            f"not selected: the pod is in namespace {view.namespace} and PodProbeMarker "
            f"{ref} applies only to pods of namespace {ref.namespace}"
        )
    if view.deleting:
        return (
            "the pod is terminating: the daemon neither probes it nor writes to it "
            "(it keeps what it shows)"
        )
    if view.terminal:
        return (
            f"the pod has finished (phase {view.phase}): the daemon neither probes it nor "
            "writes to it"
        )
    if not selector_matches(marker.selector, view.labels):
        return f"not selected: the marker's selector {selector_text(marker.selector)!r} does not match the pod's labels"
    if not match_pod(view, [marker]):
        names = sorted({p.container_name for p in marker.probes})
        return f"the pod has none of the marker's containers ({', '.join(names)})"
    return None


def not_run(
    facts: ContainerFacts | None, container: str, timing: Timing, *, now: float
) -> Outcome | None:
    """The daemon's gate (`decide.gate`) before a run: None to run the probe now; else
    the outcome instead of a run: Failed for a container that is not running (as the
    daemon), Unknown for one the daemon would wait for (not started, initial delay)."""
    passage = gate(facts, timing, now=now)
    if passage is Gate.RUN:
        return None
    if passage is Gate.NOT_RUNNING:
        return not_running(container)
    if facts is None or not facts.container_id:
        return Outcome.unknown(f"not run: container {container} has not been created yet")
    if not facts.started:
        return Outcome.unknown(f"not run: container {container} has not started (startup probe)")
    left = timing.initial_delay_seconds - int(now - (facts.started_at or now))
    return Outcome.unknown(
        f"not run: the daemon waits initialDelaySeconds ({timing.initial_delay_seconds}) "
        f"from the container's start, {left}s more"
    )


def decided_of(owner: OwnerRef, spec: ProbeSpec, outcome: Outcome) -> Decided | None:
    """The `Decided` the daemon would hold if `outcome` were its decided result; None
    for Unknown, which is never decided. The one place check makes a `Decided`."""
    state = state_of(outcome.result)
    if state is None:
        return None
    return Decided(owner, spec, state, outcome.message, result_of(spec, outcome))


@dataclass(frozen=True, slots=True)
class PodPlan:
    desired: DesiredPod
    patch: list[dict[str, Any]]
    frozen_markers: frozenset[str]  # other markers recorded on the pod, kept as they are


def plan_pod(
    view: PodView, marker: Marker, outcomes: Mapping[ProbeKey, Outcome], *, now: str
) -> PodPlan:
    """The desired state and patch for `view` with `outcomes` as decided results
    (see the module docstring); `now` stamps changed conditions (RFC 3339)."""
    keys = match_pod(view, [marker])
    live: dict[OwnerRef, ProbeSpec | None] = {key.owner: spec for key, spec in keys.items()}
    record, _ = parse_record(view.annotations.value(OWNED_KEY), pod_uid=view.uid)
    decided = []
    for key in sorted(keys):
        outcome = outcomes.get(key)
        result = None if outcome is None else decided_of(key.owner, keys[key], outcome)
        shown = record.get(key.owner)
        if result is not None and result.result is None and (shown is None or shown.state is None):
            # No answer, and nothing on the pod to keep (no entry, or one that holds
            # only a command): the daemon's first decision renders an empty Result
            # (decide.step); desired_state would keep nothing.
            result = replace(result, result="")
        if result is not None:
            decided.append(result)
    frozen = frozenset(o.marker for o in record) - {marker.ref.name}
    # What the record says of commands that may still run stays, check cannot tell,
    # but for a probe of this marker that is gone: the daemon drops its entry.
    commands = {
        o: e.held
        for o, e in record.items()
        if e.held is not None and (o.marker != marker.ref.name or o in live)
    }
    desired = desired_state(
        pod=view, decided=decided, live=live, frozen_markers=frozen, held_commands=commands
    )
    return PodPlan(desired, build_patch(pod=view, desired=desired, now=now), frozen)


def policy_values(spec: ProbeSpec, outcome: Outcome) -> dict[str, dict[str, str]] | None:
    """The labels and annotations the policy for `outcome`'s state sets, `{{.Result}}`
    rendered as the daemon renders it (`decide.result_of`, `api.template.render`);
    None for Unknown or a state without a policy. Whether each value may go on the pod
    is the desired state's question (`DesiredPod.invalid`)."""
    state = state_of(outcome.result)
    policy = None if state is None else spec.policy_for(state)
    if policy is None:
        return None
    result = result_of(spec, outcome)
    if result is None:  # no answer: the daemon keeps or clears those (the patch says)
        return {
            "labels": {k: v for k, v in policy.labels.items() if not uses_result(v)},
            "annotations": {k: v for k, v in policy.annotations.items() if not uses_result(v)},
        }
    return {
        "labels": {k: render(v, result) for k, v in policy.labels.items()},
        "annotations": {k: render(v, result) for k, v in policy.annotations.items()},
    }


def readiness_gates(pod: Mapping[str, Any]) -> frozenset[str]:
    """The condition types the pod's `spec.readinessGates` lists: the kubelet counts a
    condition towards Ready only for these (set when the pod was created, immutable)."""
    spec = pod.get("spec")
    gates = spec.get("readinessGates") if isinstance(spec, Mapping) else None
    if not isinstance(gates, list):
        return frozenset()
    return frozenset(
        g["conditionType"]
        for g in gates
        if isinstance(g, Mapping) and isinstance(g.get("conditionType"), str)
    )


def result_shown(spec: ProbeSpec, outcome: Outcome) -> str | None:
    """What `{{.Result}}` stands for after `outcome`, or None when no policy uses it."""
    if not spec.uses_result or outcome.result is Result.UNKNOWN:
        return None
    return result_of(spec, outcome)  # None: no answer, nothing to show
