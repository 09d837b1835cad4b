"""`probemarker status`: the daemons' answers as a table or JSON, and the exit code.

Stage: edge (pure; no I/O). Input: one `NodeStatus` per node asked (the daemon's
document, observe/snapshot.py, or the reason there is none). Output: text for the
terminal (`render_text`: one row a probe, like `kubectl get`), JSON with a versioned
shape (`render_json`), and the exit code (`exit_code`: 0 when the nodes asked are
settled, 1 otherwise).

Settled (`settled`): nothing shown will change without a new event from the API
server (a pod, a marker, a container that starts or stops). A probe is settled when it
is decided, or when it cannot run until such an event: its pod lacks the container
(a pod's containers never change: `ContainerMissing` is settled, a container not yet
created or started is not), the pod is being deleted or has finished (probing stopped,
nothing is written to it, docs/engine.md: shown as `Terminating`, `Finished`), or it cannot run
here (`CannotRun`: a named port the container does not declare, a kind this build
lacks; it stays so until the marker changes). A pending write is never settled, nor is
a probe counting toward its first threshold, one waiting for its initial delay or for
a held command, nor an answer the daemon cut (`omitted`: its rows are not shown).

Everything a pod, a marker or a probe's output put into the document is printed with
control characters escaped (`api.fields.printable`; JSON through `printable_json`), and
each cell of the table is cut (`CELL`), so no value can break a line or a terminal.
The document is checked for its version before anything is read from it
(`document_problem`), and each field is read as the type it should be.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from probemarker.kit.printable import printable, printable_json
from probemarker.observe.snapshot import SNAPSHOT_VERSION

__all__ = [
    "LIST_VERSION",
    "NodeStatus",
    "document_problem",
    "exit_code",
    "render_json",
    "render_text",
    "select",
    "settled",
]

LIST_VERSION = "probemarker.io/status-list/v2"  # the shape `-o json` prints
CELL = 60  # characters of a MESSAGE cell
PROBLEM = 400  # characters of a node's problem (a daemon's error, its stderr, its answer)
COLUMNS = ("POD", "MARKER/PROBE", "STATE", "COUNT", "LAST", "NEXT", "MESSAGE")
# Why a probe does not run (engine/seen.py `Waiting`) that only a new event from the API
# server changes: a pod, a marker or the daemon's own image.
SETTLED_WAITS = frozenset({"ContainerMissing", "PodTerminating", "PodFinished", "CannotRun"})
# What STATE shows for a pod that is no longer probed (docs/engine.md: it keeps what it shows).
STOPPED = {"PodTerminating": "Terminating", "PodFinished": "Finished"}


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """One node's answer: `document` (the daemon's, checked) or `problem` (why there
    is none, or what is wrong beside it: a daemon not ready). `daemon`: its pod,
    NS/NAME, or "" when read from a socket."""

    node: str
    daemon: str = ""
    problem: str | None = None
    document: Mapping[str, Any] | None = None
    pods: tuple[Mapping[str, Any], ...] = field(default=())
    # the daemon's count of what did not fit its answer: {"namespace", "pods", "probes"}
    omitted: tuple[Mapping[str, Any], ...] = field(default=())

    @classmethod
    def answered(
        cls, node: str, daemon: str, document: Mapping[str, Any], problem: str | None = None
    ) -> NodeStatus:
        pods = tuple(p for p in _list(document.get("pods")) if isinstance(p, Mapping))
        omitted = tuple(o for o in _list(document.get("omitted")) if isinstance(o, Mapping))
        if problem is None and document.get("ready") is False:
            problem = "the daemon is not ready: its informers have not synced"
        return cls(node, daemon, problem, document, pods, omitted)


def document_problem(document: object) -> str | None:
    """Why `document` is not a status this command reads; None when it is."""
    if not isinstance(document, Mapping):
        return "the daemon's answer is not a JSON object"
    if "error" in document:
        return f"the daemon refused the request: {document.get('error')}"
    version = document.get("apiVersion")
    if version != SNAPSHOT_VERSION:
        return (
            f"the daemon answered {version!r}, this probemarker reads {SNAPSHOT_VERSION}: "
            "use the probemarker release of the daemon's image"
        )
    if not isinstance(document.get("pods"), list):
        return "the daemon's answer has no pods list"
    return None


def select(
    pods: Iterable[Mapping[str, Any]],
    *,
    pod: str | None,
    marker: str | None,
    namespace: str | None = None,
) -> tuple[Mapping[str, Any], ...]:
    """The pods (and probes) the filters keep: `pod` NS/NAME, `marker` NS/NAME, the
    pods of `namespace`. The daemon applies them already; this keeps a reader honest
    with a daemon that did not (one older than a filter)."""
    kept = []
    for item in pods:
        if pod is not None and f"{item.get('namespace')}/{item.get('name')}" != pod:
            continue
        if namespace is not None and item.get("namespace") != namespace:
            continue
        probes = [p for p in _list(item.get("probes")) if isinstance(p, Mapping)]
        if marker is not None:
            probes = [p for p in probes if p.get("marker") == marker]
            if not probes:
                continue
        kept.append({**item, "probes": probes})
    return tuple(kept)


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _map(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _text(value: object) -> str:
    return printable(value if isinstance(value, str) else "" if value is None else str(value))


def _cut(text: str, limit: int = CELL) -> str:
    line = text.split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _when(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _ago(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def decided(probe: Mapping[str, Any]) -> bool:
    return isinstance(probe.get("state"), str)


def _waits(probe: Mapping[str, Any]) -> str | None:
    waiting = _map(probe.get("waiting"))
    reason = None if waiting is None else waiting.get("reason")
    return reason if isinstance(reason, str) else None


def settled(probe: Mapping[str, Any]) -> bool:
    """Whether nothing about `probe` changes without a new event (module docstring)."""
    return decided(probe) or _waits(probe) in SETTLED_WAITS


def _state_text(probe: Mapping[str, Any]) -> str:
    if decided(probe):
        return _text(probe.get("state"))
    return STOPPED.get(_waits(probe) or "", "<none>")


def _row(pod: Mapping[str, Any], probe: Mapping[str, Any], now: datetime | None) -> list[str]:
    marker = _text(probe.get("marker")).rpartition("/")[2]
    count = _map(probe.get("count")) or {}
    count_text = "-"  # nothing counted, or results that agree with the state: toward nothing
    if count.get("result") is not None and count.get("result") != probe.get("state"):
        count_text = (
            f"{_text(count.get('runs'))}/{_text(count.get('threshold'))} "
            f"{_text(count.get('result'))}"
        )
    last = _map(probe.get("last"))
    last_text = "-"
    if last is not None:
        at = _when(last.get("time"))
        ago = "" if at is None or now is None else f" {_ago((now - at).total_seconds())} ago"
        last_text = f"{_text(last.get('result'))}{ago}"
    waiting = _map(probe.get("waiting"))
    if waiting is not None:
        next_text = _text(waiting.get("reason"))
    elif probe.get("running") is True:
        next_text = "running"
    else:
        due = _when(probe.get("next"))
        next_text = "-" if due is None or now is None else f"in {_ago((due - now).total_seconds())}"
    if waiting is not None:
        message = waiting.get("message")
    elif last is not None:
        message = last.get("message")
    else:
        message = probe.get("message")
    return [
        f"{_text(pod.get('namespace'))}/{_text(pod.get('name'))}",
        f"{marker}/{_text(probe.get('probe'))}",
        _state_text(probe),
        count_text,
        last_text,
        next_text,
        _cut(_text(message)),
    ]


def _changes_text(changes: object) -> str:
    """A pending write's changes in one line: `labels_set a=b; conditions x=True`."""
    if not isinstance(changes, Mapping):
        return ""
    parts = []
    for name, part in changes.items():
        if isinstance(part, Mapping):
            shown = ", ".join(f"{_text(k)}={_text(v)}" for k, v in part.items())
        else:
            shown = ", ".join(_text(v) for v in _list(part))
        parts.append(f"{_text(name)} {shown}")
    return "; ".join(parts)


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def _shown(nodes: Sequence[NodeStatus]) -> int:
    """How many probe rows `nodes` show."""
    return sum(
        1
        for node in nodes
        for pod in node.pods
        for probe in _list(pod.get("probes"))
        if isinstance(probe, Mapping)
    )


def _omitted_line(node: NodeStatus, item: Mapping[str, Any]) -> str:
    namespace = _text(item.get("namespace"))
    return (
        f"  {_text(node.node)}: namespace {namespace}: {_text(item.get('pods'))} pods, "
        f"{_text(item.get('probes'))} probes; see them with -n {namespace} (and --pod or "
        "--marker)"
    )


def render_text(nodes: Sequence[NodeStatus], *, asked: str | None = None) -> str:
    """The table (a NODE column first when more than one node answered), then each
    pending write with what it waits for, then each node's problem. `asked`: the
    filters given (`--pod NS/NAME`), named when they match nothing."""
    several = len([n for n in nodes if n.document is not None]) > 1
    header = (["NODE"] if several else []) + list(COLUMNS)
    rows: list[list[str]] = [header]
    writes: list[str] = []
    for node in nodes:
        now = None if node.document is None else _when(node.document.get("time"))
        for pod in node.pods:
            for probe in _list(pod.get("probes")):
                if isinstance(probe, Mapping):
                    rows.append(([_text(node.node)] if several else []) + _row(pod, probe, now))
            write = pod.get("write")
            if isinstance(write, Mapping):
                until = _when(write.get("until"))
                wait = (
                    ""
                    if until is None or now is None
                    else f" (for {_ago((until - now).total_seconds())})"
                )
                writes.append(
                    f"  {_text(pod.get('namespace'))}/{_text(pod.get('name'))}: "
                    f"{_cut(_changes_text(write.get('changes')), 200)}; waits: "
                    f"{_text(write.get('waits'))}{wait}"
                )
    if len(rows) > 1:
        lines = _table(rows)
    elif asked is not None:
        lines = [
            f"No probes of {_text(asked)} on the nodes asked: the pod is on another node "
            "(--node), not seen by its daemon yet, or no marker selects it; or a name is "
            "misspelt."
        ]
    else:
        lines = ["No probes on the nodes asked."]
    if writes:
        lines += ["", "Pending writes:", *writes]
    omitted = [_omitted_line(node, item) for node in nodes for item in node.omitted]
    if omitted:
        lines += [
            "",
            "Not shown (over the daemon's answer, shared by namespace; docs/cli.md):",
            *omitted,
        ]
    problems = [n for n in nodes if n.problem is not None]
    if problems:
        lines += ["", "Nodes:"]
        lines += [
            f"  {_text(n.node)}{f' ({_text(n.daemon)})' if n.daemon else ''}: {_cut(_text(n.problem), PROBLEM)}"
            for n in problems
        ]
    return "\n".join(lines) + "\n"


def render_json(nodes: Sequence[NodeStatus]) -> str:
    """`{"apiVersion": LIST_VERSION, "nodes": [{"node", "daemon", "problem", "ready",
    "time", "pods", "omitted"}]}`: each node's pods as its daemon's document has them."""
    body = {
        "apiVersion": LIST_VERSION,
        "nodes": [
            {
                "node": n.node,
                "daemon": n.daemon or None,
                "problem": None if n.problem is None else _cut(n.problem, PROBLEM),
                "ready": None if n.document is None else n.document.get("ready"),
                "time": None if n.document is None else n.document.get("time"),
                "pods": list(n.pods),
                "omitted": list(n.omitted),
            }
            for n in nodes
        ],
    }
    text = orjson.dumps(body, option=orjson.OPT_INDENT_2).decode()
    return printable_json(text) + "\n"


def exit_code(nodes: Sequence[NodeStatus], *, asked: str | None = None) -> int:
    """0 when every node answered whole and is settled: every probe shown `settled`, no
    pending write; 1 otherwise, and when filters were given (`asked`) and match no
    probe: a pod the daemon has not seen yet is not a pod labelled."""
    if asked is not None and _shown(nodes) == 0:
        return 1
    for node in nodes:
        if node.problem is not None or node.document is None or node.omitted:
            return 1
        for pod in node.pods:
            if pod.get("write") is not None:
                return 1
            if not all(isinstance(p, Mapping) and settled(p) for p in _list(pod.get("probes"))):
                return 1
    return 0
