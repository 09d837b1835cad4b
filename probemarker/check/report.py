"""The report of `probemarker check`: its values, its exit code, its two outputs.

Stage: edge (pure formatting; run.py fills it in). Input: what check found per pod
and probe. Output: text for a terminal (`render_text`), a JSON document for scripts
(`to_json`, shape below, stable: fields are added, never renamed or removed, within
one `apiVersion`; `render_json` is its text), and the exit code (`exit_code`).

Invariant: whoever can create a marker or a pod, or write a probe's output, controls
much of what the report shows, and the operator reads it on a terminal. Every piece
of text that comes from them (names, keys, values, messages, templates, problems,
errors echoed back) goes through `api.fields.printable`: no control character (raw
newline and tab included), escape sequence or bidi mark of theirs reaches the
terminal; they are shown escaped (`\\x1b`, `\\n`, `\\u202e`). The report's own layout
is the only source of newlines. The JSON text escapes the same characters as JSON
`\\uXXXX` escapes (`printable_json`): the same document for a parser.

Exit codes: 0 every probe run Succeeded (and at least one ran); 1 a probe Failed, is
Unknown or not reachable from here, or no probe ran at all (no pod selected, every pod
skipped); 2 a usage or validation error (cli.py and run.py, before a report exists).

JSON (`--output json`):

    {"apiVersion": "probemarker.io/check/v1", "kind": "CheckReport",
     "marker": "NS/NAME", "source": "FILE" | "cluster",
     "namespace": str,                    # the marker's namespace: the pods it selects
     "namespaceFrom": str,                # where it came from (metadata.namespace in
                                          # FILE, --namespace, --marker, the kubeconfig
                                          # context's, the pod's, the default)
     "wrote": false,                      # check never writes to the cluster
     "asIfDecided": true,                 # patches assume each outcome is decided
     "viaApiProxy": bool, "direct": bool,
     "pods": [{"pod": "NS/NAME", "uid": str, "skipped": str | null,
               "probes": [{"probe": str, "container": str, "kind": "exec|httpGet|tcpSocket|grpc",
                           "via": "pods/exec" | "the API server's pod proxy" | "the pod IP" | null,
                           "status": "Succeeded|Failed|Unknown|NotReachable",
                           "message": str, "decided": bool,
                           "threshold": int,   # consecutive results the daemon waits for
                           "values": {"labels": {..}, "annotations": {..}} | null,
                           "condition": {"type", "status", "reason", "message"} | null,
                           "result": str | null,  # what {{.Result}} stands for
                           "readinessGate": {"conditionType": str, "gated": bool} | null,
                                          # null: the probe has no podConditionType
                           "invalid": [{"kind", "key", "value", "problem"}]}],
               "patch": [RFC 6902 ops],   # [] when the pod already shows it
               "conflicts": [str], "recordProblem": str | null,
               "heldMarkers": [str]}],
     "summary": {"pods": int, "skipped": int, "probes": int, "Succeeded": int,
                 "Failed": int, "Unknown": int, "NotReachable": int},
     "exitCode": int}
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from probemarker.kit.printable import printable, printable_json

__all__ = [
    "API_VERSION",
    "EXIT_NOT_ALL_SUCCEEDED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CheckReport",
    "PodCheck",
    "ProbeCheck",
    "Status",
    "exit_code",
    "gate_line",
    "render_json",
    "render_text",
    "summary",
    "to_json",
]

API_VERSION: Final = "probemarker.io/check/v1"
EXIT_OK: Final = 0
EXIT_NOT_ALL_SUCCEEDED: Final = 1
EXIT_USAGE: Final = 2
NOTHING_WRITTEN: Final = "Nothing is written to the cluster: no patch, no event."
AS_IF_DECIDED: Final = (
    "Each patch is what the daemon would send if this run's outcome were decided (as if\n"
    "decided: the daemon waits for successThreshold / failureThreshold consecutive results,\n"
    "and holds a message-only change for --message-refresh-seconds). Unknown is never\n"
    "decided: it changes nothing."
)


class Status(enum.StrEnum):
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"
    NOT_REACHABLE = "NotReachable"  # a network probe from outside the cluster


@dataclass(frozen=True, slots=True)
class ProbeCheck:
    probe: str
    container: str
    kind: str
    via: str | None
    status: Status
    message: str
    threshold: int  # consecutive results of this state the daemon waits for
    values: Mapping[str, Mapping[str, str]] | None = None
    condition: Mapping[str, str] | None = None
    result: str | None = None  # what {{.Result}} stands for; None: no policy uses it
    # Rendered values the daemon would refuse: kind, key, value, problem each.
    invalid: tuple[Mapping[str, str], ...] = ()
    # The probe's podConditionType and whether the pod's spec.readinessGates lists it;
    # None: the probe sets no condition.
    gate: tuple[str, bool] | None = None

    @property
    def decided(self) -> bool:
        return self.status in (Status.SUCCEEDED, Status.FAILED)


@dataclass(frozen=True, slots=True)
class PodCheck:
    pod: str  # NS/NAME
    uid: str = ""
    skipped: str | None = None  # why it was not probed
    probes: tuple[ProbeCheck, ...] = ()
    patch: Sequence[Mapping[str, Any]] = ()
    conflicts: tuple[str, ...] = ()
    record_problem: str | None = None
    frozen_markers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CheckReport:
    marker: str
    source: str  # the file, or "cluster"
    namespace: str = ""  # the marker's namespace (the pods it selects)
    namespace_from: str = ""  # where that came from (run.file_namespace)
    pods: tuple[PodCheck, ...] = ()
    via_api_proxy: bool = False
    direct: bool = False
    notes: tuple[str, ...] = field(default=())


def summary(report: CheckReport) -> dict[str, int]:
    counts = {str(s): 0 for s in Status}
    for pod in report.pods:
        for probe in pod.probes:
            counts[str(probe.status)] += 1
    return {
        "pods": len(report.pods),
        "skipped": sum(1 for p in report.pods if p.skipped is not None),
        "probes": sum(len(p.probes) for p in report.pods),
        **counts,
    }


def exit_code(report: CheckReport) -> int:
    """See the module docstring."""
    probes = [probe for pod in report.pods for probe in pod.probes]
    if probes and all(p.status is Status.SUCCEEDED for p in probes):
        return EXIT_OK
    return EXIT_NOT_ALL_SUCCEEDED


def _probe_json(probe: ProbeCheck) -> dict[str, Any]:
    return {
        "probe": probe.probe,
        "container": probe.container,
        "kind": probe.kind,
        "via": probe.via,
        "status": str(probe.status),
        "message": probe.message,
        "decided": probe.decided,
        "threshold": probe.threshold,
        "values": None if probe.values is None else {k: dict(v) for k, v in probe.values.items()},
        "condition": None if probe.condition is None else dict(probe.condition),
        "result": probe.result,
        "invalid": [dict(i) for i in probe.invalid],
        "readinessGate": (
            None if probe.gate is None else {"conditionType": probe.gate[0], "gated": probe.gate[1]}
        ),
    }


def to_json(report: CheckReport) -> dict[str, Any]:
    """The `--output json` document (see the module docstring)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "CheckReport",
        "marker": report.marker,
        "source": report.source,
        "namespace": report.namespace,
        "namespaceFrom": report.namespace_from,
        "wrote": False,
        "asIfDecided": True,
        "viaApiProxy": report.via_api_proxy,
        "direct": report.direct,
        "pods": [
            {
                "pod": pod.pod,
                "uid": pod.uid,
                "skipped": pod.skipped,
                "probes": [_probe_json(p) for p in pod.probes],
                "patch": [dict(op) for op in pod.patch],
                "conflicts": list(pod.conflicts),
                "recordProblem": pod.record_problem,
                "heldMarkers": list(pod.frozen_markers),
            }
            for pod in report.pods
        ],
        "summary": summary(report),
        "exitCode": exit_code(report),
    }


_LABELS: Final = {
    Status.SUCCEEDED: "Succeeded",
    Status.FAILED: "Failed",
    Status.UNKNOWN: "Unknown",
    Status.NOT_REACHABLE: "Unknown (not reachable from here)",
}


def _quoted(text: str) -> str:
    return f"'{printable(text)}'"


def _values_lines(probe: ProbeCheck) -> list[str]:
    lines: list[str] = []
    if probe.result is not None:
        lines.append(f"    {{{{.Result}}}}: {_quoted(probe.result)}")
    refused = {(i["kind"], i["key"]): i for i in probe.invalid}
    if probe.values is not None:
        for kind in ("labels", "annotations"):
            for key, value in sorted(probe.values.get(kind, {}).items()):
                bad = refused.get((kind[:-1], key))
                if bad is None:
                    lines.append(f"    would set {kind[:-1]} {printable(key)}={printable(value)}")
                else:
                    lines.append(
                        f"    would NOT set {kind[:-1]} {printable(key)}={_quoted(value)}: "
                        f"{printable(bad['problem'])} (within the pod's state the last valid "
                        "value stays, across a transition the key is removed; the daemon "
                        "reports it with an InvalidResultValue event)"
                    )
    if probe.condition is not None:
        c = {name: printable(text) for name, text in probe.condition.items()}
        lines.append(
            f"    would set condition {c['type']}={c['status']} ({c['reason']})"
            + (f": {c['message']}" if c.get("message") else "")
        )
    return lines


def gate_line(condition_type: str, gated: bool) -> str:
    """Whether the condition decides the pod's Ready (see `ProbeCheck.gate`)."""
    shown = printable(condition_type)
    if gated:
        return (
            f"    readiness gate: the pod's spec.readinessGates lists {shown}: the kubelet "
            "counts this condition towards the pod's Ready"
        )
    return (
        f"    no readiness gate: the pod's spec.readinessGates does not list {shown}, so this "
        "condition does not affect the pod's Ready; a gate is set only when a pod is "
        f"created: add {{conditionType: {shown}}} to the workload's pod template, or "
        'annotate the marker probemarker.io/inject-readiness-gates: "true" with a '
        "readiness-gates component installed (docs/installation.md), then re-create the pod"
    )


def _probe_lines(probe: ProbeCheck) -> list[str]:
    via = f", via {printable(probe.via)}" if probe.via else ""
    lines = [
        f"  probe {printable(probe.probe)} (container {printable(probe.container)}, "
        f"{printable(probe.kind)}{via}): {_LABELS[probe.status]}"
    ]
    if probe.message:
        # One line: the output's own line breaks are shown as \n, so a probe cannot
        # print what looks like another line of this report.
        lines.append(f"    message: {printable(probe.message)}")
    lines += _values_lines(probe)
    if probe.gate is not None:
        lines.append(gate_line(*probe.gate))
    if probe.decided:
        lines.append(
            f"    as if decided: the daemon waits for {probe.threshold} consecutive "
            f"{probe.status} result{'s' if probe.threshold != 1 else ''}"
        )
    else:
        lines.append("    not decided: changes nothing on the pod")
    return lines


def _patch_lines(patch: Sequence[Mapping[str, Any]]) -> list[str]:
    if not patch:
        return ["  patch: none (the pod already shows this)"]
    lines = ["  patch (JSON patch to pods/status, as the daemon would send it):"]
    for op in patch:
        lines.append("    " + printable_json(json.dumps(dict(op), ensure_ascii=False)))
    return lines


def _pod_lines(pod: PodCheck) -> list[str]:
    name = printable(pod.pod)
    if pod.skipped is not None:
        return [f"pod {name}: skipped: {printable(pod.skipped)}"]
    lines = [f"pod {name}"]
    for probe in pod.probes:
        lines += _probe_lines(probe)
    for conflict in pod.conflicts:
        lines.append(f"  conflict: {printable(conflict)}")
    if pod.record_problem:
        lines.append(f"  ownership record: {printable(pod.record_problem)}")
    if pod.frozen_markers:
        lines.append(
            "  kept as they are (other markers recorded on the pod): "
            + ", ".join(printable(m) for m in sorted(pod.frozen_markers))
        )
    return lines + _patch_lines(pod.patch)


def render_text(report: CheckReport) -> str:
    """The report for a terminal (see docs/cli.md for an example)."""
    lines = [
        f"probemarker check: PodProbeMarker {printable(report.marker)} "
        f"({printable(report.source)})",
    ]
    if report.namespace_from:
        lines.append(
            f"Namespace {printable(report.namespace)}: {printable(report.namespace_from)}."
        )
    lines += [NOTHING_WRITTEN, AS_IF_DECIDED]
    if report.via_api_proxy:
        lines.append("httpGet probes were sent through the API server's pod proxy (pods/proxy).")
    if report.direct:
        lines.append("Network probes connected to the pod IPs directly (--direct).")
    lines += (printable(note) for note in report.notes)
    for pod in report.pods:
        lines.append("")
        lines += _pod_lines(pod)
    counts = summary(report)
    lines += [
        "",
        f"summary: {counts['pods']} pod{'s' if counts['pods'] != 1 else ''} "
        f"({counts['skipped']} skipped), {counts['probes']} probe run"
        f"{'s' if counts['probes'] != 1 else ''}: {counts['Succeeded']} Succeeded, "
        f"{counts['Failed']} Failed, {counts['Unknown']} Unknown, "
        f"{counts['NotReachable']} not reachable from here; wrote nothing; "
        f"exit {exit_code(report)}",
    ]
    return "\n".join(lines) + "\n"


def render_json(report: CheckReport) -> str:
    """`to_json` as indented JSON text, terminal-safe (see the module docstring)."""
    return printable_json(orjson.dumps(to_json(report), option=orjson.OPT_INDENT_2).decode()) + "\n"
