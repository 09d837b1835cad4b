"""What the daemon holds, as `probemarker status` reads it: a versioned JSON document.

Stage: observe (pure; no I/O, time only through the arguments). Input: the engine's
pods and probes (`Engine.inspect`, engine/seen.py) and each pod's pending write
(`PodWriter.pending`, write/pending.py), the wall clock and the engine's clock at the
moment they were read. Output: a dict of JSON values per pod (`pod_document`), and the
whole document (`build_snapshot`), `SNAPSHOT_VERSION` first; a reader refuses another
version (status/read.py). observe/answer.py encodes it under the answer's budget.

Bounds: one row per probe of a pod on this node (pods x probes), and in a row one
entry per key of its policies (at most 2 x 32 labels and 2 x 32 annotations, the API's
bounds): the answer grows with pods x probes x keys, never with what a template
renders. Every message is cleaned and cut as a condition message is
(`probe.output.clean_message`, 1 KiB); every value a policy renders, or that is refused,
is shown as `kit.text.shown` shows it: at most `SHOWN_LIMIT` (256) bytes of JSON, with
its size and digest, measured from its pieces without building it
(`api.template.render_pieces`: a 4 KiB template of 372 `{{.Result}}` renders 380 KB);
a refused value that is the one the row's `values` show is not repeated. A pending
write lists keys and condition types, label values only (annotation values may be
long), as the writer's log line does. `PROBE_BYTES` is the most one row takes.

The document (docs/cli.md, "probemarker status -o json"):
    {"apiVersion": "probemarker.io/status/v2", "node", "ready", "time",
     "pods": [{"namespace", "name", "uid", "phase", "deleting",
               "write": null | {"changes", "waits", "until", "scope"},
               "probes": [{"marker", "probe", "container", "kind", "state", "message",
                           "count": {"result", "runs", "threshold"}, "unknownRuns",
                           "last": null | {"time", "result", "duration", "message",
                                           "values": null | {"labels": {key: V},
                                                             "annotations": {key: V}},
                                           "refused": [{"kind", "key", "problem",
                                                        "value": V | null}]},
                           "next", "running", "waiting": null | {"reason", "message"}}]}],
     "omitted": [{"namespace", "pods", "probes"}]}
    V = {"value": str (cut), "bytes": int (the whole value's), "sha256": str (12 hex)}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from probemarker.api import rules
from probemarker.api.model import ProbeSpec
from probemarker.api.template import render_pieces
from probemarker.decide.decide import ThresholdState, result_of, state_of
from probemarker.engine.seen import LastRun, PodSeen, ProbeSeen
from probemarker.kit.text import SHOWN_LIMIT, Shown, shown
from probemarker.probe.outcome import Result
from probemarker.probe.output import MESSAGE_LIMIT, clean_message
from probemarker.write.desired import DesiredPod
from probemarker.write.pending import PendingWrite

__all__ = [
    "PROBE_BYTES",
    "SNAPSHOT_VERSION",
    "build_snapshot",
    "head_document",
    "pod_document",
    "time_text",
]

SNAPSHOT_VERSION = "probemarker.io/status/v2"

# The most one probe's row takes as compact JSON (what the socket sends), from the API's
# bounds: a key is a qualified name (317 ASCII characters at most); one policy has at
# most 32 labels and 32 annotations, and a row shows one policy's values (the last
# run's state) and the refusals of one (the decided state's); a shown value or
# problem takes at most SHOWN_LIMIT bytes of JSON; a cleaned message 1 KiB of UTF-8,
# twice that as JSON (a newline, a tab, '"' and '\\' take two bytes). tests/unit/
# observe/test_snapshot.py builds the largest row there is and holds it to this.
_KEY = rules.MAX_QUALIFIED_NAME_LENGTH
_SHOWN = SHOWN_LIMIT + 64  # {"value": ..., "bytes": ..., "sha256": ...}
_ENTRIES = 2 * rules.MAX_POLICY_ENTRIES  # one policy's labels and annotations
_VALUE_ENTRY = _KEY + 8 + _SHOWN  # "key": V,
_REFUSED_ENTRY = _KEY + 64 + SHOWN_LIMIT + _SHOWN  # {"kind", "key", "problem", "value": V},
_MESSAGE = 2 * MESSAGE_LIMIT
# names, numbers, times, the marker (317), the probe's name (63 characters, escaped:
# 378), the container (63): 2 KiB; three messages: the decided one, the last run's, why
# it waits.
PROBE_BYTES = 2048 + 3 * _MESSAGE + _ENTRIES * (_VALUE_ENTRY + _REFUSED_ENTRY)


def time_text(seconds: float) -> str:
    """Unix seconds as RFC 3339 in UTC, to the millisecond."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


OnWall = Callable[[float | None], str | None]


def wall_times(wall_now: float, clock_now: float) -> OnWall:
    """Times on the engine's clock as wall-clock text: `wall_now` (Unix seconds) and
    `clock_now` (the engine's monotonic clock) are the same moment."""

    def on_wall(moment: float | None) -> str | None:
        return None if moment is None else time_text(wall_now + (moment - clock_now))

    return on_wall


def head_document(*, node: str, ready: bool, wall_now: float) -> dict[str, Any]:
    """The document without its pods (and without `omitted`)."""
    return {
        "apiVersion": SNAPSHOT_VERSION,
        "node": node,
        "ready": ready,
        "time": time_text(wall_now),
    }


def build_snapshot(
    *,
    node: str,
    ready: bool,
    pods: Iterable[tuple[PodSeen, PendingWrite | None]],
    wall_now: float,
    clock_now: float,
) -> dict[str, Any]:
    """The whole document for `pods` (each with its pending write), nothing omitted
    (see the module docstring); observe/answer.py builds the daemon's answer under its
    budget from the same parts."""
    on_wall = wall_times(wall_now, clock_now)
    return {
        **head_document(node=node, ready=ready, wall_now=wall_now),
        "pods": [pod_document(pod, write, on_wall) for pod, write in pods],
        "omitted": [],
    }


def pod_document(pod: PodSeen, pending: PendingWrite | None, on_wall: OnWall) -> dict[str, Any]:
    """One pod of the document, with its probes and its pending write."""
    view = pod.view
    write = None
    if pending is not None:
        write = {
            "changes": dict(pending.changes),
            "waits": str(pending.waits),
            "until": on_wall(pending.until),
            "scope": pending.scope,
        }
    return {
        "namespace": view.namespace,
        "name": view.name,
        "uid": view.uid,
        "phase": view.phase,
        "deleting": view.deleting,
        "write": write,
        "probes": [_probe(p, pod.desired, on_wall) for p in pod.probes],
    }


def _value(value: Shown) -> dict[str, Any]:
    return {"value": value.text, "bytes": value.size, "sha256": value.short_digest}


def _probe(probe: ProbeSeen, desired: DesiredPod | None, on_wall: OnWall) -> dict[str, Any]:
    key, spec, thresholds = probe.key, probe.spec, probe.thresholds
    decided = thresholds.decided
    return {
        "marker": str(key.marker),
        "probe": key.probe,
        "container": key.container,
        "kind": probe.kind,
        "state": None if decided is None else str(decided.state),
        "message": None if decided is None else clean_message(decided.message),
        "count": _count(thresholds, spec),
        "unknownRuns": probe.unknown_runs,
        "last": None if probe.last is None else _last(probe, desired),
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


def _values(
    last: LastRun, spec: ProbeSpec, thresholds: ThresholdState
) -> dict[str, dict[str, Shown]] | None:
    """The labels and annotations the last run's state renders, each as shown (cut,
    measured and digested from its pieces, never built whole); None when it renders
    none (an Unknown run, a state without a policy)."""
    outcome = last.outcome
    state = state_of(outcome.result)
    policy = None if state is None else spec.policy_for(state)
    if policy is None or state is None:
        return None
    result = result_of(spec, outcome)
    decided = thresholds.decided
    if result is None:  # no answer: the state's value stands (decide.step)
        kept = decided.result if decided is not None and decided.state is state else ""
        result = kept or ""
    return {
        "labels": {k: shown(render_pieces(v, result)) for k, v in sorted(policy.labels.items())},
        "annotations": {
            k: shown(render_pieces(v, result)) for k, v in sorted(policy.annotations.items())
        },
    }


def _last(probe: ProbeSeen, desired: DesiredPod | None) -> dict[str, Any]:
    last = probe.last
    assert last is not None
    values = _values(last, probe.spec, probe.thresholds)
    refused = []
    for bad in () if desired is None else desired.invalid:
        if bad.owner != probe.key.owner:
            continue
        value = shown(bad.pieces())
        showing = None if values is None else values[f"{bad.kind}s"].get(bad.key)
        same = showing is not None and showing.digest == value.digest
        refused.append(
            {
                "kind": bad.kind,
                "key": bad.key,
                "problem": shown(bad.problem).text,
                "value": None if same else _value(value),  # null: the one `values` shows
            }
        )
    return {
        "time": time_text(last.at),
        "result": str(last.outcome.result),
        "duration": round(last.duration, 3),
        "message": clean_message(last.outcome.message),
        "values": None
        if values is None
        else {
            part: {k: _value(v) for k, v in shown_values.items()}
            for part, shown_values in values.items()
        },
        "refused": refused,
    }
