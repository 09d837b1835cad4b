"""`probemarker check`: run a marker's probes once against pods, print what the daemon
would write, write nothing.

Stage: edge (I/O). Input: `CheckOptions` (from cli.py) and the connection settings
(`settings.resolve_connection`: --kubeconfig, --context, --marker-group, as `probemarker
run` reads them). Output: the report on `out` (text or JSON), problems on `err`, and
the exit code (report.py). The marker is a file's or the cluster's (marker.py), the
decisions the daemon's (plan.py says which); the requests are reads only: GET/LIST of
pods and markers, pods/exec (a GET WebSocket), and with --via-api-proxy a GET of
pods/proxy. No PATCH, POST, PUT or DELETE is ever sent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

import anyio

from probemarker.api.model import Marker
from probemarker.check import plan
from probemarker.check.marker import UsageError, marker_to_check, read_marker_file, split_ref
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
from probemarker.identity.probes import ProbeKey
from probemarker.kube.connect.errors import ApiNotFound
from probemarker.kube.connect.resources import PODS
from probemarker.probe.outcome import Outcome, Result
from probemarker.probe.runner import action_kind
from probemarker.watch.pods import PodView, pod_projection, pod_view

__all__ = ["CheckOptions", "run_check"]

_PROBES_AT_ONCE = 16  # probe runs at once (each an exec connection or a request)
_STATUS = {Result.SUCCEEDED: Status.SUCCEEDED, Result.FAILED: Status.FAILED}


@dataclass(frozen=True, slots=True)
class CheckOptions:
    file: str | None = None
    marker: str | None = None  # NS/NAME
    pods: tuple[str, ...] = ()  # NS/NAME each
    namespace: str | None = None
    via_api_proxy: bool = False
    direct: bool = False
    output: str = "text"


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
    from probemarker.daemon.assembly import client_settings
    from probemarker.kube.connect.client import KubeClient
    from probemarker.kube.connect.config import connect

    _check_refs(options)
    marker_file = None
    if options.file is not None:
        marker_file = read_marker_file(options.file, options.namespace, err=err)
    connection = await connect(settings.connection, dict(os.environ))
    async with KubeClient(connection, settings=client_settings(settings)) as client:
        marker, namespace_from = await marker_to_check(
            client, options.marker, marker_file, connection, settings.marker_group, err=err
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
