"""`probemarker status`: ask each node's daemon what it holds, through the API server.

Stage: edge (I/O). Input: `StatusOptions` (from cli.py) and the `ConnectionSettings`
(kube/connect/config.py: --kubeconfig, --context, as `check` reads them).
Output: one `NodeStatus` per node (render.py prints them), or with `--local` the
daemon's own answer as it is.

Three ways to read:
- from the cluster (the default): LIST the daemon pods (`--daemon-namespace`,
  `--daemon-selector`) with the user's own credentials, and for each one (on
  `--node` only, when given) run `probemarker status --local` in its container
  through `pods/exec` (the daemon's own exec client, probe/execstream.py). So reading needs
  `list` on pods and `get` + `create` on pods/exec in the daemon's namespace, nothing
  on the nodes (docs/rbac.md). Nodes are asked `NODES_AT_ONCE` at a time;
- `--socket PATH`: a daemon run locally with `--status-socket PATH`;
- `--local`: inside the daemon's container, the socket at `--socket` (default
  `PROBEMARKER_STATUS_SOCKET`, else `DEFAULT_SOCKET`): its answer is printed as it
  is (the reader above parses it); status/local.py, on the standard library only.

Every answer is bounded: `ANSWER_LIMIT` bytes from the socket and from an exec (the
rest is dropped and the node named with the fix: narrow with --pod or --marker).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

import anyio
import orjson

from probemarker.kube.connect.client import ClientSettings, KubeClient
from probemarker.kube.connect.config import ConnectionSettings, connect
from probemarker.kube.connect.errors import ApiForbidden, ApiNotFound
from probemarker.kube.connect.resources import PODS
from probemarker.probe.execresult import ExecExited, ExecNotStarted
from probemarker.probe.execstream import ExecSettings, run_exec
from probemarker.status.local import (
    ANSWER_LIMIT,
    DAEMON_CONTAINER,
    DAEMON_NAMESPACE,
    DAEMON_SELECTOR,
    DEFAULT_SOCKET,
    SOCKET_WAIT,
    StatusOptions,
    UsageError,
    read_answer,
    request_line,
    socket_path,
)
from probemarker.status.render import NodeStatus, document_problem, select

__all__ = [
    "DAEMON_CONTAINER",
    "DAEMON_NAMESPACE",
    "DAEMON_SELECTOR",
    "DEFAULT_SOCKET",
    "ReadError",
    "StatusOptions",
    "UsageError",
    "read_cluster",
    "read_socket",
]

NODES_AT_ONCE = 8
EXEC_WAIT = 40.0  # seconds for an exec of the reader, its start included


class ReadError(Exception):
    """The daemons could not be listed (RBAC, an unreachable cluster): printed, exit 1."""


def _filters(options: StatusOptions) -> list[str]:
    args = []
    if options.namespace is not None:
        args += ["--namespace", options.namespace]
    if options.pod is not None:
        args += ["--pod", options.pod]
    if options.marker is not None:
        args += ["--marker", options.marker]
    return args


async def read_socket(path: str, options: StatusOptions) -> bytes:
    """The daemon's answer at `path` (`local.read_answer`, in a worker thread); OSError
    (with a message that says what to check) when there is none."""
    return await anyio.to_thread.run_sync(
        functools.partial(read_answer, path, request_line(options))
    )


def _parsed(node: str, daemon: str, text: str | bytes, options: StatusOptions) -> NodeStatus:
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return NodeStatus(node, daemon, problem=f"the daemon's answer is not JSON: {exc}")
    problem = document_problem(document)
    if problem is not None:
        return NodeStatus(node, daemon, problem=problem)
    kept = {
        **document,
        "pods": list(
            select(
                document["pods"],
                pod=options.pod,
                marker=options.marker,
                namespace=options.namespace,
            )
        ),
    }
    return NodeStatus.answered(node, daemon, kept)


async def read_local_socket(options: StatusOptions, environ: Mapping[str, str]) -> NodeStatus:
    """`--socket PATH`: one daemon, run locally."""
    path = socket_path(options, environ)
    try:
        answer = await read_socket(path, options)
    except OSError as exc:
        return NodeStatus(options.node or "(local)", problem=str(exc))
    status = _parsed(options.node or "(local)", "", answer, options)
    if status.document is not None:
        node = status.document.get("node")
        status = NodeStatus.answered(
            node if isinstance(node, str) and node else "(local)",
            "",
            status.document,
            status.problem,
        )
    return status


def _daemon_problem(raw: Mapping[str, Any], container: str) -> tuple[bool, str | None]:
    """(whether the reader can run in it, what is wrong) of a daemon pod."""
    meta: Mapping[str, Any] = raw.get("metadata") or {}
    status: Mapping[str, Any] = raw.get("status") or {}
    if meta.get("deletionTimestamp"):
        return False, "the daemon pod is being deleted"
    statuses = [s for s in status.get("containerStatuses") or [] if s.get("name") == container]
    running = bool(statuses) and "running" in (statuses[0].get("state") or {})
    if not running:
        phase = status.get("phase") or "Unknown"
        waiting = ((statuses[0].get("state") or {}).get("waiting") or {}) if statuses else {}
        why = f" ({waiting.get('reason')})" if waiting.get("reason") else ""
        return False, f"the daemon is not running: pod phase {phase}, container {container}{why}"
    ready = [c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    if ready[:1] != ["True"]:
        return True, "the daemon pod is not ready (its /readyz fails: informers not synced?)"
    return True, None


def reader_failed(exit_code: int, stderr: str) -> str:
    """Why `probemarker status --local` failed in a daemon's container: its last line of
    stderr, or, from an image older than the command (its parser refuses `status`,
    `--local` or `--namespace`, exit 2), which image to run."""
    said = stderr.strip().splitlines()[-1:] or [f"exit code {exit_code}"]
    if exit_code == 2 and "unrecognized arguments: --namespace" in said[0]:
        return (
            "the daemon's image has no `probemarker status -n` (a release older than it): "
            "upgrade the DaemonSet to this probemarker's image, or leave -n out"
        )
    if exit_code == 2 and ("invalid choice: 'status'" in said[0] or "--local" in said[0]):
        return (
            "the daemon's image has no `probemarker status --local` (a release older than "
            "the status command): upgrade the DaemonSet to this probemarker's image"
        )
    # The command names itself in its own error line (cli.py): named once, not twice.
    return f"probemarker status --local: {said[0].removeprefix('probemarker status --local: ')}"


async def _ask(client: KubeClient, raw: Mapping[str, Any], options: StatusOptions) -> NodeStatus:
    meta = raw.get("metadata") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    node = str((raw.get("spec") or {}).get("nodeName") or "(unscheduled)")
    daemon = f"{namespace}/{name}"
    runs, problem = _daemon_problem(raw, options.daemon_container)
    if not runs:
        return NodeStatus(node, daemon, problem=problem)
    command = ["probemarker", "status", "--local", *_filters(options)]
    result = await run_exec(
        client,
        namespace=namespace,
        pod=name,
        container=options.daemon_container,
        command=command,
        time_limit=SOCKET_WAIT + 5,
        wait=EXEC_WAIT,
        settings=ExecSettings(keep_bytes=ANSWER_LIMIT),
    )
    if isinstance(result, ExecExited):
        if result.stdout_dropped:
            return NodeStatus(
                node,
                daemon,
                problem=f"the answer is larger than {ANSWER_LIMIT >> 20} MiB; narrow it with "
                "--pod or --marker",
            )
        if result.exit_code != 0:
            return NodeStatus(node, daemon, problem=reader_failed(result.exit_code, result.stderr))
        status = _parsed(node, daemon, result.stdout, options)
        if problem is not None and status.document is not None:
            return NodeStatus.answered(node, daemon, status.document, problem)
        return status
    if isinstance(result, ExecNotStarted):
        return NodeStatus(
            node,
            daemon,
            problem=f"cannot run probemarker status --local in container "
            f"{options.daemon_container}: {result.message} (an image older than the status "
            "command?)",
        )
    if result.http_status == 403:
        return NodeStatus(
            node,
            daemon,
            problem=f"the API server refused pods/exec on {daemon} (403): reading status needs "
            f"get and create on pods/exec in namespace {namespace} (docs/rbac.md)",
        )
    return NodeStatus(
        node, daemon, problem=f"the daemon is unreachable through pods/exec: {result}"
    )


async def read_cluster(options: StatusOptions, settings: ConnectionSettings) -> list[NodeStatus]:
    """Every daemon's answer (only `options.node`'s when given), by node name."""
    connection = await connect(settings, dict(os.environ))
    namespace = options.daemon_namespace
    async with KubeClient(
        connection, settings=ClientSettings(exec_connections=NODES_AT_ONCE)
    ) as client:
        params = [("labelSelector", options.daemon_selector)]
        if options.node is not None:
            params.append(("fieldSelector", f"spec.nodeName={options.node}"))
        try:
            listed = await client.request(
                "GET", PODS.path(namespace), info=PODS.info("list", namespace), params=params
            )
        except ApiForbidden as exc:
            raise ReadError(
                f"cannot list pods in namespace {namespace} ({exc}): reading status needs list "
                f"on pods and get and create on pods/exec there (docs/rbac.md)"
            ) from exc
        except ApiNotFound as exc:
            raise UsageError(
                f"namespace {namespace} not found: where is the daemon installed? "
                "(--daemon-namespace)"
            ) from exc
        daemons = [p for p in listed.get("items") or [] if isinstance(p, Mapping)]
        found: list[NodeStatus] = []
        limiter = anyio.CapacityLimiter(NODES_AT_ONCE)

        async def one(raw: Mapping[str, Any]) -> None:
            async with limiter:
                found.append(await _ask(client, raw, options))

        async with anyio.create_task_group() as group:
            for raw in daemons:
                group.start_soon(one, raw)
    if not daemons:
        where = f"node {options.node}" if options.node is not None else "any node"
        found.append(
            NodeStatus(
                options.node or "(none)",
                problem=f"no daemon pod on {where} (pods labelled {options.daemon_selector} "
                f"in namespace {namespace}): is the DaemonSet installed and scheduled there?",
            )
        )
    return sorted(found, key=lambda n: (n.node, n.daemon))
