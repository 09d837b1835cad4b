"""What the daemon holds, as `probemarker status` reads it: a versioned JSON document.

Stage: observe (pure; no I/O, time only through the arguments). Input: the engine's
pods and probes (`Engine.inspect`, engine/seen.py) and each pod's pending write
(`PodWriter.pending`, write/pending.py), the wall clock and the engine's clock at the
moment they were read. Output: a dict of JSON values, `SNAPSHOT_VERSION` first; a
reader refuses another version (status/read.py).

Bounds: one row per probe of a pod on this node (pods x probes); every message is
cleaned and cut as a condition message is (`probe.output.clean_message`, 1 KiB);
rendered values come from the probe's answer as the pod would get them (the answer's
first line, cut); a pending write lists keys and condition types, label values only
(annotation values may be long), as the writer's log line does.

The document (docs/cli.md, "probemarker status -o json"):
    {"apiVersion": "probemarker.io/status/v1", "node", "ready", "time",
     "pods": [{"namespace", "name", "uid", "phase", "deleting",
               "write": null | {"changes", "waits", "until", "scope"},
               "probes": [{"marker", "probe", "container", "kind", "state", "message",
                           "count": {"result", "runs", "threshold"}, "unknownRuns",
                           "last": null | {"time", "result", "duration", "message",
                                           "values", "refused"},
                           "next", "running", "waiting": null | {"reason", "message"}}]}]}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from probemarker.api.model import ProbeSpec
from probemarker.api.template import render
from probemarker.decide.decide import ThresholdState, result_of, state_of
from probemarker.engine.seen import LastRun, PodSeen, ProbeSeen
from probemarker.probe.outcome import Result
from probemarker.probe.output import clean_message
from probemarker.watch.pods import PodUID
from probemarker.write.desired import DesiredPod
from probemarker.write.pending import PendingWrite

__all__ = ["SNAPSHOT_VERSION", "build_snapshot", "time_text"]

SNAPSHOT_VERSION = "probemarker.io/status/v1"


def time_text(seconds: float) -> str:
    """Unix seconds as RFC 3339 in UTC, to the millisecond."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def build_snapshot(
    *,
    node: str,
    ready: bool,
    pods: Sequence[PodSeen],
    writes: Mapping[PodUID, PendingWrite | None],
    wall_now: float,
    clock_now: float,
) -> dict[str, Any]:
    """The document for `pods` (see the module docstring). `wall_now` (Unix seconds)
    and `clock_now` (the engine's monotonic clock) are the same moment: due times on the
    engine's clock are shown as wall-clock times."""

    def on_wall(moment: float | None) -> str | None:
        return None if moment is None else time_text(wall_now + (moment - clock_now))

    out = []
    for pod in pods:
        view = pod.view
        pending = writes.get(view.uid)
        write = None
        if pending is not None:
            write = {
                "changes": dict(pending.changes),
                "waits": str(pending.waits),
                "until": on_wall(pending.until),
                "scope": pending.scope,
            }
        out.append(
            {
                "namespace": view.namespace,
                "name": view.name,
                "uid": view.uid,
                "phase": view.phase,
                "deleting": view.deleting,
                "write": write,
                "probes": [_probe(p, pod.desired, on_wall) for p in pod.probes],
            }
        )
    return {
        "apiVersion": SNAPSHOT_VERSION,
        "node": node,
        "ready": ready,
        "time": time_text(wall_now),
        "pods": out,
    }


def _probe(
    probe: ProbeSeen, desired: DesiredPod | None, on_wall: Callable[[float | None], str | None]
) -> dict[str, Any]:
    key, spec, thresholds = probe.key, probe.spec, probe.thresholds
    decided = thresholds.decided
    refused = [
        {"kind": bad.kind, "key": bad.key, "value": bad.value, "problem": bad.problem}
        for bad in (() if desired is None else desired.invalid)
        if bad.owner == key.owner
    ]
    return {
        "marker": str(key.marker),
        "probe": key.probe,
        "container": key.container,
        "kind": probe.kind,
        "state": None if decided is None else str(decided.state),
        "message": None if decided is None else clean_message(decided.message),
        "count": _count(thresholds, spec),
        "unknownRuns": probe.unknown_runs,
        "last": None if probe.last is None else _last(probe.last, spec, thresholds, refused),
        "next": on_wall(probe.due),
        "running": probe.running,
        "waiting": None
        if probe.waiting is None
        else {"reason": str(probe.waiting), "message": clean_message(probe.detail)},
    }


def _count(thresholds: ThresholdState, spec: ProbeSpec) -> dict[str, Any]:
    """The consecutive identical results counted (Unknown is not), and the threshold
    that many of them decide."""
    last = thresholds.last
    timing = spec.timing
    threshold = timing.success_threshold if last is Result.SUCCEEDED else timing.failure_threshold
    return {
        "result": None if last is None else str(last),
        "runs": thresholds.run,
        "threshold": threshold if last is not None else None,
    }


def _last(
    last: LastRun, spec: ProbeSpec, thresholds: ThresholdState, refused: list[dict[str, str]]
) -> dict[str, Any]:
    outcome = last.outcome
    state = state_of(outcome.result)
    policy = None if state is None else spec.policy_for(state)
    values = None
    if policy is not None and state is not None:
        result = result_of(spec, outcome)
        decided = thresholds.decided
        if result is None:  # no answer: the state's value stands (decide.step)
            kept = decided.result if decided is not None and decided.state is state else ""
            result = kept or ""
        values = {
            "labels": {k: render(v, result) for k, v in sorted(policy.labels.items())},
            "annotations": {k: render(v, result) for k, v in sorted(policy.annotations.items())},
        }
    return {
        "time": time_text(last.at),
        "result": str(outcome.result),
        "duration": round(last.duration, 3),
        "message": clean_message(outcome.message),
        "values": values,
        "refused": refused,
    }
