"""`probemarker check`: run a marker's probes once against pods, print what the daemon
would write, write nothing.

Stage: edge (I/O). Input: `CheckOptions` (from cli.py) and the connection settings
(`settings.resolve_connection`: --kubeconfig, --context, --marker-group, as `probemarker
run` reads them). Output: the report on `out` (text or JSON), problems on `err`, and
the exit code (report.py). The decisions are the daemon's (plan.py says which); the
requests are reads only: GET/LIST of pods and markers, pods/exec (a GET WebSocket), and
with --via-api-proxy a GET of pods/proxy. No PATCH, POST, PUT or DELETE is ever sent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

import anyio

from probemarker.api import rules
from probemarker.api.model import Marker
from probemarker.api.parse import InvalidMarker
from probemarker.check import plan
from probemarker.check.report import (
    CheckReport,
    PodCheck,
    ProbeCheck,
    Status,
    exit_code,
    render_json,
    render_text,
)
from probemarker.daemon.settings import RunSettings
from probemarker.kube.connect.config import Connection
from probemarker.kube.connect.errors import ApiNotFound
from probemarker.kube.connect.resources import PODS
from probemarker.match.identity import ProbeKey
from probemarker.probe.outcome import Outcome, Result
from probemarker.probe.runner import action_kind
from probemarker.watch.pods import PodView, pod_view
from probemarker.write.ownership import pod_projection

__all__ = ["CheckOptions", "UsageError", "run_check", "split_ref"]

_PROBES_AT_ONCE = 16  # probe runs at once (each an exec connection or a request)
_STATUS = {Result.SUCCEEDED: Status.SUCCEEDED, Result.FAILED: Status.FAILED}


class UsageError(Exception):
    """A problem with the command line or its input: printed, exit 2."""


@dataclass(frozen=True, slots=True)
class CheckOptions:
    file: str | None = None
    marker: str | None = None  # NS/NAME
    pods: tuple[str, ...] = ()  # NS/NAME each
    namespace: str | None = None
    via_api_proxy: bool = False
    direct: bool = False
    output: str = "text"


def split_ref(text: str, what: str) -> tuple[str, str]:
    """`NS/NAME` -> (NS, NAME); UsageError naming the flag otherwise."""
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise UsageError(f"{what} {text!r}: expected NAMESPACE/NAME, for example default/web-0")
    return namespace, name


@dataclass(frozen=True, slots=True)
class MarkerFile:
    """The one marker document of a file, validated; parsed once its namespace is
    known (`file_namespace`), which may take the connection's."""

    body: Mapping[str, Any]
    label: str  # the file, `<stdin>` for `-`
    namespace: str | None  # metadata.namespace, else --namespace; None: neither


def read_marker_file(path: str, namespace: str | None, *, err: TextIO) -> MarkerFile:
    """The one PodProbeMarker of `path` (`-`: stdin), validated as `probemarker validate`
    does, with its messages; UsageError when it cannot be used. A `metadata.namespace`
    that differs from `namespace` (--namespace) is an error, as `kubectl apply -f -n`."""
    from probemarker.api.documents import DocumentError, load_documents, other_object
    from probemarker.check.validate import validate_document

    label = "<stdin>" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else _read(path)
        documents = list(load_documents(text))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"-f {label}: cannot read: {exc}") from exc
    except DocumentError as exc:
        raise UsageError(f"{label}: {exc}") from exc
    markers = [d for d in documents if other_object(d.body) is None]
    if len(markers) != 1:
        raise UsageError(
            f"-f {label}: holds {len(markers)} PodProbeMarkers; check runs exactly one "
            "(put it in a file of its own, or use --marker NS/NAME)"
        )
    doc = markers[0]
    said = io.StringIO()  # `probemarker validate`'s lines, shown only when invalid
    if not validate_document(label, doc, out=said):
        err.write(said.getvalue())
        raise UsageError(f"{label}: the PodProbeMarker is invalid (messages above)")
    meta = doc.body.get("metadata") or {}
    own = meta.get("namespace")
    if own and namespace and own != namespace:
        raise UsageError(
            f"the namespace of the marker in {label} ({own}) does not match --namespace "
            f"{namespace}; drop --namespace or change metadata.namespace"
        )
    return MarkerFile(body=doc.body, label=label, namespace=own or namespace)


def file_namespace(marker: MarkerFile, connection: Connection) -> tuple[str, str]:
    """(namespace, where it came from) of a marker file, as `kubectl apply -f` chooses
    it: `metadata.namespace`, else --namespace, else the connection's (the kubeconfig
    context's namespace; in a pod, its own), else `default`."""
    from probemarker.api import names

    if marker.namespace is not None:
        own = (marker.body.get("metadata") or {}).get("namespace")
        return marker.namespace, (f"metadata.namespace in {marker.label}" if own else "--namespace")
    problems = names.dns1123_label_problems(connection.namespace)
    if problems:
        raise UsageError(
            f"-f {marker.label} sets no metadata.namespace, and the default namespace "
            f"{connection.namespace!r} ({connection.namespace_from}) {problems[0]}; pass "
            "--namespace NS or fix the namespace there"
        )
    return connection.namespace, connection.namespace_from


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


async def marker_from_cluster(client: Any, text: str, group: str, *, err: TextIO) -> Marker:
    """The marker NS/NAME as the API server holds it, validated as the daemon does."""
    from probemarker.kit.printable import printable
    from probemarker.watch.markers import marker_resource, read_marker

    namespace, name = split_ref(text, "--marker")
    resource = marker_resource(group)
    try:
        raw = await client.request(
            "GET", resource.path(namespace, name), info=resource.info("get", namespace, name)
        )
    except ApiNotFound as exc:
        raise UsageError(
            f"--marker {text}: PodProbeMarker {name} not found in namespace {namespace} "
            f"(group {group}; kubectl get ppm -A lists them; if none are listed, the CRD of "
            f"group {group} may not be installed)"
        ) from exc
    try:
        return read_marker(raw, api_version=f"{group}/{rules.VERSION}")
    except InvalidMarker as exc:
        for error in exc.errors:
            err.write(f"cluster: PodProbeMarker {printable(exc.ref)}: {printable(str(error))}\n")
        raise UsageError(
            f"--marker {text}: the PodProbeMarker is invalid (messages above)"
        ) from exc


async def _pods(
    client: Any, options: CheckOptions, marker: Marker
) -> list[PodCheck | dict[str, Any]]:
    """The pods to check: each --pod (a PodCheck when it cannot be read), or every pod
    of the namespace the marker selects."""
    found: list[PodCheck | dict[str, Any]] = []
    if options.pods:
        for text in options.pods:
            namespace, name = split_ref(text, "--pod")
            try:
                found.append(
                    await client.request(
                        "GET", PODS.path(namespace, name), info=PODS.info("get", namespace, name)
                    )
                )
            except ApiNotFound:
                found.append(PodCheck(pod=text, skipped=f"pod {text} not found"))
        return found
    namespace = marker.ref.namespace
    listed = await client.request("GET", PODS.path(namespace), info=PODS.info("list", namespace))
    for item in listed.get("items") or []:
        view = pod_view(pod_projection(item))
        problem = plan.selection_problem(view, marker)
        if problem is None or not problem.startswith("not selected"):
            found.append(item)
    return found


async def _run_probe(
    runner: Any, key: ProbeKey, view: PodView, spec: Any, options: CheckOptions
) -> tuple[Outcome, str | None, bool]:
    """(outcome, via, reachable) of one probe on one pod."""
    from probemarker.probe.handler import probe_target

    via = plan.route(spec.handler, via_api_proxy=options.via_api_proxy, direct=options.direct)
    facts = view.containers.get(key.container)
    instead = plan.not_run(facts, key.container, spec.timing, now=time.time())
    if instead is not None:
        return instead, via, True
    if via is None:
        message = plan.not_reachable_message(
            action_kind(spec.handler), via_api_proxy=options.via_api_proxy
        )
        return Outcome.unknown(message), None, False
    assert facts is not None  # not_run returned None: the container runs
    outcome: Outcome = await runner.run(spec, probe_target(view, key, facts))
    return outcome, via, True


def _probe_check(
    key: ProbeKey, spec: Any, outcome: Outcome, via: str | None, reachable: bool
) -> ProbeCheck:
    status = _STATUS.get(outcome.result, Status.UNKNOWN) if reachable else Status.NOT_REACHABLE
    threshold = (
        spec.timing.failure_threshold
        if outcome.result is Result.FAILED
        else spec.timing.success_threshold
    )
    return ProbeCheck(
        probe=key.probe,
        container=key.container,
        kind=action_kind(spec.handler),
        via=via,
        status=status,
        message=outcome.message,
        threshold=threshold,
        values=plan.policy_values(spec, outcome),
        result=plan.result_shown(spec, outcome),
    )


async def _check_pod(
    runner: Any,
    raw: Mapping[str, Any],
    marker: Marker,
    options: CheckOptions,
    limiter: anyio.CapacityLimiter,
) -> PodCheck:
    from probemarker.kit.clock import rfc3339_now
    from probemarker.match.match import match_pod

    view = pod_view(pod_projection(raw))
    name = f"{view.namespace}/{view.name}"
    problem = plan.selection_problem(view, marker)
    if problem is not None:
        return PodCheck(pod=name, uid=view.uid, skipped=problem)
    keys = match_pod(view, [marker])
    results: dict[ProbeKey, tuple[Outcome, str | None, bool]] = {}

    async def one(key: ProbeKey) -> None:
        async with limiter:
            results[key] = await _run_probe(runner, key, view, keys[key], options)

    async with anyio.create_task_group() as group:
        for key in sorted(keys):
            group.start_soon(one, key)
    outcomes = {key: result[0] for key, result in results.items()}
    pod_plan = plan.plan_pod(view, marker, outcomes, now=rfc3339_now())
    gates = plan.readiness_gates(raw)
    probes = []
    for key in sorted(keys):
        outcome, via, reachable = results[key]
        check = _probe_check(key, keys[key], outcome, via, reachable)
        condition = None
        type_ = keys[key].condition_type
        want = pod_plan.desired.conditions.get(type_) if type_ and check.decided else None
        if want is not None:
            condition = {
                "type": want.type,
                "status": want.status,
                "reason": want.reason,
                "message": want.message,
            }
        # The one-shot CLI shows a refused value whole, as its `values` do (a value
        # the daemon refuses from its size alone is built here, never in the daemon).
        invalid = tuple(
            {"kind": i.kind, "key": i.key, "value": "".join(i.pieces()), "problem": i.problem}
            for i in pod_plan.desired.invalid
            if i.owner == key.owner
        )
        gate = None if not type_ else (type_, type_ in gates)
        probes.append(dataclasses.replace(check, condition=condition, invalid=invalid, gate=gate))
    return PodCheck(
        pod=name,
        uid=view.uid,
        probes=tuple(probes),
        patch=pod_plan.patch,
        conflicts=tuple(_conflict_text(c) for c in pod_plan.desired.conflicts),
        record_problem=pod_plan.desired.record_problem,
        frozen_markers=tuple(sorted(pod_plan.frozen_markers)),
    )


def _conflict_text(conflict: Any) -> str:
    return (
        f"{conflict.kind} {conflict.key}: {conflict.winner} sets {conflict.winner_value!r} and "
        f"wins over {conflict.loser}, which wants {conflict.loser_value!r}"
    )


def _check_refs(options: CheckOptions) -> None:
    """The NS/NAME arguments, before anything is read: UsageError naming the flag."""
    if options.marker is not None:
        namespace, _ = split_ref(options.marker, "--marker")
        if options.namespace and options.namespace != namespace:
            raise UsageError(
                f"--marker {options.marker} is in namespace {namespace}, not --namespace "
                f"{options.namespace}; a marker selects pods of its own namespace only"
            )
    for text in options.pods:
        split_ref(text, "--pod")


async def _marker(
    client: Any,
    options: CheckOptions,
    marker_file: MarkerFile | None,
    connection: Connection,
    group: str,
    *,
    err: TextIO,
) -> tuple[Marker, str]:
    """The marker to check, and where its namespace came from."""
    from probemarker.api.parse import parse_marker

    if marker_file is None:
        return await marker_from_cluster(client, options.marker or "", group, err=err), "--marker"
    namespace, namespace_from = file_namespace(marker_file, connection)
    return parse_marker(marker_file.body, default_namespace=namespace), namespace_from


async def _check_pods(
    client: Any, settings: RunSettings, options: CheckOptions, marker: Marker
) -> list[PodCheck]:
    """Each pod to check, its probes run once with the handlers the options allow."""
    from probemarker.api.model import HTTPGetAction
    from probemarker.check.proxy import ApiProxyHTTPGetHandler
    from probemarker.daemon.assembly import probe_handlers
    from probemarker.kit.clock import MONOTONIC
    from probemarker.probe.runner import ProbeRunner

    # The daemon's handlers, built as the daemon builds them: exec probes through
    # pods/exec (a GET: check writes nothing and needs no runtime socket), the network
    # kinds from here only with --direct; --via-api-proxy: httpGet through the API server.
    handlers = probe_handlers(
        client, settings, clock=MONOTONIC, backend="api", network=options.direct
    )
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(handlers.opened())
        table = handlers.table()
        if options.via_api_proxy and not options.direct:  # plan.route: direct wins
            table[HTTPGetAction] = await stack.enter_async_context(ApiProxyHTTPGetHandler(client))
        runner = ProbeRunner(table)
        limiter = anyio.CapacityLimiter(_PROBES_AT_ONCE)
        pods: list[PodCheck] = []
        for item in await _pods(client, options, marker):
            if isinstance(item, PodCheck):
                pods.append(item)
            else:
                pods.append(await _check_pod(runner, item, marker, options, limiter))
    return pods


async def run_check(
    options: CheckOptions, settings: RunSettings, *, out: TextIO, err: TextIO
) -> int:
    """See the module docstring; UsageError for exit 2 (the caller prints it)."""
    from probemarker.daemon.assembly import client_settings, connect
    from probemarker.kube.connect.client import KubeClient

    _check_refs(options)
    marker_file = None
    if options.file is not None:
        marker_file = read_marker_file(options.file, options.namespace, err=err)
    connection = await connect(settings, dict(os.environ))
    async with KubeClient(connection, settings=client_settings(settings)) as client:
        marker, namespace_from = await _marker(
            client, options, marker_file, connection, settings.marker_group, err=err
        )
        pods = await _check_pods(client, settings, options, marker)
    namespace = marker.ref.namespace
    report = CheckReport(
        marker=str(marker.ref),
        namespace=namespace,
        namespace_from=namespace_from,
        source=f"from {options.file}" if options.file is not None else "from the cluster",
        pods=tuple(pods),
        via_api_proxy=options.via_api_proxy,
        direct=options.direct,
        notes=()
        if pods
        else (
            f"No pod in namespace {namespace} is selected by "
            f"{plan.selector_text(marker.selector)!r}.",
        ),
    )
    out.write(render_json(report) if options.output == "json" else render_text(report))
    return exit_code(report)
