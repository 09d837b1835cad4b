"""Server-side `Table` output (meta.k8s.io/v1), what `kubectl get` prints.

kubectl asks `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...`.  The
columns and cells follow kube-apiserver's printers
(pkg/printers/internalversion/printers.go) for pods, namespaces, nodes and
events; custom resources use their CRD version's additionalPrinterColumns
(apiextensions-apiserver's tableconvertor: simple JSONPath, `date` columns
as human durations, non-scalar strings as JSON) plus Age; everything else
gets the default Name / Created At columns.  Row objects are
PartialObjectMetadata unless `includeObject=Object` (or `None`).
Ages use apimachinery's duration.HumanDuration.  Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson

from probemarker.sim.server.discovery.catalog import EVENTS, EVENTS_V1, NAMESPACES, NODES, PODS
from probemarker.sim.store.objects import ResourceType

Column = dict[str, Any]
Cells = Callable[[dict[str, Any], datetime], list[Any]]


def wants_table(accept: str) -> bool:
    first = accept.split(",")[0]
    return "as=Table" in first and "g=meta.k8s.io" in first


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _since(timestamp: str | None, now: datetime) -> str:
    if not timestamp:
        return "<unknown>"
    when = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return human_duration((now - when).total_seconds())


def _col(
    name: str, description: str = "", *, type_: str = "string", format_: str = "", priority: int = 0
) -> Column:
    return {
        "name": name,
        "type": type_,
        "format": format_,
        "description": description,
        "priority": priority,
    }


def _age(obj: dict[str, Any], now: datetime) -> str:
    return _since(obj.get("metadata", {}).get("creationTimestamp"), now)


def _pod_cells(pod: dict[str, Any], now: datetime) -> list[Any]:
    spec, status, meta = pod.get("spec", {}), pod.get("status", {}), pod.get("metadata", {})
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    reason = status.get("reason") or status.get("phase") or "Pending"
    for s in statuses:
        state = s.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            term = state["terminated"]
            reason = term.get("reason") or f"ExitCode:{term.get('exitCode', 0)}"
    if meta.get("deletionTimestamp"):
        reason = "Terminating"
    gates = spec.get("readinessGates") or []
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    gates_text = (
        (
            f"{sum(1 for g in gates if conditions.get(g.get('conditionType')) == 'True')}"
            f"/{len(gates)}"
        )
        if gates
        else "<none>"
    )
    return [
        meta.get("name"),
        f"{ready}/{len(spec.get('containers') or [])}",
        reason,
        str(restarts),
        _age(pod, now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_text,
    ]


_POD_COLUMNS = [
    _col("Name", "Name must be unique within a namespace.", format_="name"),
    _col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", "The aggregate status of the containers in this pod."),
    _col("Restarts", "The number of times the containers in this pod have been restarted."),
    _col(
        "Age",
        "CreationTimestamp is a timestamp representing the server time when this "
        "object was created.",
    ),
    _col("IP", "IP address allocated to the pod.", priority=1),
    _col("Node", "Name of the Node this pod is assigned to.", priority=1),
    _col("Nominated Node", "Name of the node nominated for preemption.", priority=1),
    _col("Readiness Gates", "Pod readiness gates.", priority=1),
]


def _namespace_cells(ns: dict[str, Any], now: datetime) -> list[Any]:
    return [ns["metadata"]["name"], (ns.get("status") or {}).get("phase", ""), _age(ns, now)]


def _node_cells(node: dict[str, Any], now: datetime) -> list[Any]:
    status = node.get("status") or {}
    ready = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    info = status.get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    condition = "Ready" if ready.get("Ready") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        condition += ",SchedulingDisabled"
    return [
        node["metadata"]["name"],
        condition,
        "<none>",
        _age(node, now),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP", "<none>"),
        addresses.get("ExternalIP", "<none>"),
        info.get("osImage", "<unknown>"),
        info.get("kernelVersion", "<unknown>"),
        info.get("containerRuntimeVersion", "<unknown>"),
    ]


def _event_cells(event: dict[str, Any], now: datetime) -> list[Any]:
    # Served as core/v1 or events.k8s.io/v1: the printer sees the same internal event.
    involved = event.get("involvedObject") or event.get("regarding") or {}
    first = (
        event.get("firstTimestamp")
        or event.get("deprecatedFirstTimestamp")
        or event.get("eventTime")
        or ""
    )
    last = (
        event.get("lastTimestamp")
        or event.get("deprecatedLastTimestamp")
        or event.get("eventTime")
        or ""
    )
    source = event.get("source") or event.get("deprecatedSource") or {}
    count = event.get("count") or event.get("deprecatedCount") or 1
    return [
        _since(last, now),
        event.get("type", ""),
        event.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        involved.get("fieldPath", ""),
        source.get("component", ""),
        event.get("message") or event.get("note") or "",
        _since(first, now),
        count,
        event["metadata"]["name"],
    ]


_TABLES: dict[ResourceType, tuple[list[Column], Cells]] = {
    PODS: (_POD_COLUMNS, _pod_cells),
    NAMESPACES: ([_col("Name", format_="name"), _col("Status"), _col("Age")], _namespace_cells),
    NODES: (
        [
            _col("Name", format_="name"),
            _col("Status"),
            _col("Roles"),
            _col("Age"),
            _col("Version"),
            _col("Internal-IP", priority=1),
            _col("External-IP", priority=1),
            _col("OS-Image", priority=1),
            _col("Kernel-Version", priority=1),
            _col("Container-Runtime", priority=1),
        ],
        _node_cells,
    ),
    EVENTS: (
        [
            _col("Last Seen"),
            _col("Type"),
            _col("Reason"),
            _col("Object"),
            _col("Subobject", priority=1),
            _col("Source", priority=1),
            _col("Message"),
            _col("First Seen", priority=1),
            _col("Count", priority=1),
            _col("Name", priority=1),
        ],
        _event_cells,
    ),
}
_TABLES[EVENTS_V1] = _TABLES[EVENTS]

_PATH_TOKEN = re.compile(r"\.([A-Za-z0-9_-]+)|\[(\*|\d+)\]|\['([^']*)'\]")


def jsonpath_values(obj: Any, path: str) -> list[Any]:
    """The values a simple JSONPath (`.a.b`, `.a[*].b`, `.a[0]`, `.a['k']`) selects."""
    values = [obj]
    for match in _PATH_TOKEN.finditer(path.strip().strip("{}")):
        key, index, quoted = match.groups()
        nxt: list[Any] = []
        for value in values:
            if (key is not None or quoted is not None) and isinstance(value, dict):
                name = key if key is not None else quoted
                if name in value:
                    nxt.append(value[name])
            elif index == "*" and isinstance(value, list):
                nxt.extend(value)
            elif index is not None and isinstance(value, list) and int(index) < len(value):
                nxt.append(value[int(index)])
        values = nxt
    return values


def _custom_cell(column: dict[str, Any], obj: dict[str, Any], now: datetime) -> Any:
    values = jsonpath_values(obj, str(column.get("jsonPath", "")))
    if not values:
        return None
    value = values[0]
    kind = column.get("type", "string")
    if kind == "date":
        return _since(value, now) if isinstance(value, str) else None
    if kind == "string":
        if isinstance(value, dict | list):
            return orjson.dumps(value).decode()
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)
    return value


def custom_columns(printer_columns: list[dict[str, Any]]) -> tuple[list[Column], Cells]:
    """Columns and cells for a custom resource (additionalPrinterColumns, default Age)."""
    if not printer_columns:
        printer_columns = [
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ]
    columns = [_col("Name", "Name must be unique within a namespace.", format_="name")]
    for c in printer_columns:
        columns.append(
            _col(
                c["name"],
                c.get("description", ""),
                type_=c.get("type", "string"),
                format_=c.get("format", ""),
                priority=int(c.get("priority", 0)),
            )
        )

    def cells(obj: dict[str, Any], now: datetime) -> list[Any]:
        return [obj["metadata"]["name"]] + [_custom_cell(c, obj, now) for c in printer_columns]

    return columns, cells


def _default_cells(obj: dict[str, Any], now: datetime) -> list[Any]:
    return [obj["metadata"]["name"], obj["metadata"].get("creationTimestamp")]


_DEFAULT = (
    [
        _col("Name", "Name must be unique within a namespace.", format_="name"),
        _col(
            "Created At",
            "CreationTimestamp is a timestamp representing the server time "
            "when this object was created.",
            type_="date",
        ),
    ],
    _default_cells,
)


def build_table(
    rt: ResourceType,
    objects: list[dict[str, Any]],
    *,
    now: datetime,
    include_object: str,
    list_meta: dict[str, Any],
    printer_columns: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    columns, cells = (
        custom_columns(printer_columns or []) if rt.is_custom else _TABLES.get(rt, _DEFAULT)
    )
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": cells(obj, now)}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    }
