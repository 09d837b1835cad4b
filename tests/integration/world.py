"""A world for the daemon's integration tests: a sim, the CRD, a stock client for the
test's own actions, scripted containers, and the real daemon against it.

The test side creates pods and markers with kubernetes_asyncio (not our client), so the
daemon's client layer is never tested against itself. Containers answer from a
`Script`: the test says what each (pod, container, command) returns, and flips it.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
from kubernetes_asyncio import client

from probemarker.api.crd import build_crd
from probemarker.daemon.app import Daemon
from probemarker.daemon.assembly import client_settings
from probemarker.daemon.settings import RunSettings
from probemarker.kit.clock import MONOTONIC, Clock
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import load_kubeconfig
from probemarker.observe.health import HealthSettings
from probemarker.sim import SimCluster
from probemarker.sim.exec.runners import ExecReply, ExecRequest
from probemarker.sim.server.discovery.catalog import EVENTS, PODS
from probemarker.sim.store.watchcache import WatchEvent
from tests.podfields import annotations_of as annotations_of
from tests.podfields import condition as condition
from tests.podfields import labels_of as labels_of

NS = "default"
GROUP, VERSION, PLURAL = "probemarker.io", "v1alpha1", "podprobemarkers"
OWNED = "probemarker.io/owned"


@dataclass
class Script:
    """What each container answers: key (pod, container, first word of the command)."""

    replies: dict[tuple[str, str, str], ExecReply] = field(default_factory=dict)
    default: ExecReply = field(default_factory=lambda: ExecReply(0, b"ok\n"))
    calls: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    called: anyio.Event = field(default_factory=anyio.Event)

    async def wait_calls(self, n: int, *, within: float = 10.0) -> None:
        """Until `n` more exec calls have been answered."""
        target = len(self.calls) + n
        with anyio.fail_after(within):
            while len(self.calls) < target:
                await self.called.wait()

    def set(self, pod: str, container: str, word: str, reply: ExecReply) -> None:
        self.replies[(pod, container, word)] = reply

    async def answer(self, request: ExecRequest) -> ExecReply:
        target = request.target
        self.calls.append((target.pod, target.container, request.command))
        self.called.set()
        self.called = anyio.Event()
        word = request.command[0] if request.command else ""
        return self.replies.get((target.pod, target.container, word), self.default)


def marker(
    name: str,
    *,
    probes: list[dict[str, Any]],
    selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodProbeMarker",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"selector": selector or {"matchLabels": {"app": "game"}}, "probes": probes},
    }


def probe(
    name: str,
    *,
    command: str = "check",
    container: str = "app",
    period: int = 1,
    success: int = 1,
    failure: int = 1,
    delay: int = 0,
    timeout: int = 1,
    condition: str | None = None,
    succeeded: dict[str, dict[str, str]] | None = None,
    failed: dict[str, dict[str, str]] | None = None,
    action: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A probe entry; `action` (e.g. `{"httpGet": {...}}`) replaces the exec `command`."""
    policies = []
    if succeeded is not None:
        policies.append({"state": "Succeeded", **succeeded})
    if failed is not None:
        policies.append({"state": "Failed", **failed})
    out: dict[str, Any] = {
        "name": name,
        "containerName": container,
        "probe": {
            **(action or {"exec": {"command": [command]}}),
            "periodSeconds": period,
            "successThreshold": success,
            "failureThreshold": failure,
            "initialDelaySeconds": delay,
            "timeoutSeconds": timeout,
        },
    }
    if policies:
        out["markerPolicy"] = policies
    if condition:
        out["podConditionType"] = condition
    return out


def flag(name: str, **kw: Any) -> dict[str, Any]:
    """A probe that sets label `<name>=yes` on success, `<name>=no` on failure."""
    return probe(
        name,
        succeeded={"labels": {name: "yes"}},
        failed={"labels": {name: "no"}},
        **kw,
    )


class World:
    def __init__(self, sim: SimCluster, api: client.ApiClient, script: Script) -> None:
        self.sim, self.api, self.script = sim, api, script
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    async def install_crd(self) -> None:
        ext = client.ApiextensionsV1Api(self.api)
        crd: Any = build_crd()
        await ext.create_custom_resource_definition(crd)

    async def create_pod(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        containers: tuple[str, ...] = ("app",),
        sidecars: tuple[str, ...] = (),
        ports: dict[str, dict[str, int]] | None = None,
        node: str = "node-1",
        readiness_gates: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """A running pod; `sidecars` are restartable init containers, `ports` the
        declared ports by container (name -> number), `readiness_gates` the condition
        types its spec.readinessGates lists."""
        meta: dict[str, Any] = {"name": name, "namespace": NS}
        if labels is not None:
            meta["labels"] = labels
        if annotations is not None:
            meta["annotations"] = annotations
        body: Any = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": 1,
                "containers": [_container(c, ports) for c in containers],
            },
        }
        if sidecars:
            body["spec"]["initContainers"] = [
                {**_container(c, ports), "restartPolicy": "Always"} for c in sidecars
            ]
        if readiness_gates:
            body["spec"]["readinessGates"] = [{"conditionType": g} for g in readiness_gates]
        for container in (*containers, *sidecars):
            self.sim.exec_handlers.register(NS, name, container, self.script.answer)
        await self.core.create_namespaced_pod(NS, body)
        return await self.sim.kubelet.wait_running(NS, name)

    async def create_namespace(self, name: str) -> None:
        """A namespace of its own (a tenant: `create_pod` and `apply_marker` use NS)."""
        body: Any = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        await self.core.create_namespace(body)

    async def create_pod_in(self, namespace: str, name: str) -> None:
        """A running pod `app=game` with one container `app` in `namespace`; the test
        registers what its container answers (`sim.exec_handlers`) first."""
        body: Any = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": "game"}},
            "spec": {
                "nodeName": "node-1",
                "terminationGracePeriodSeconds": 1,
                "containers": [_container("app", None)],
            },
        }
        await self.core.create_namespaced_pod(namespace, body)
        await self.sim.kubelet.wait_running(namespace, name)

    async def create_marker_in(self, namespace: str, body: dict[str, Any]) -> None:
        """`body` (a `marker(...)`) created in `namespace` instead of NS."""
        body = {**body, "metadata": {**body["metadata"], "namespace": namespace}}
        await self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    async def create_bound_pod(
        self,
        name: str,
        *,
        node: str,
        containers: tuple[str, ...] = ("app",),
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A pod bound to `node`, one the sim's kubelet does not run: it stays Pending
        until the test writes its status (`write_running_status`)."""
        body: Any = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": 1,
                "containers": [_container(c, None) for c in containers],
            },
        }
        await self.core.create_namespaced_pod(NS, body)
        return self.pod(name)

    async def write_running_status(self, name: str, container_ids: dict[str, str]) -> None:
        """The status a kubelet writes for containers a real runtime runs (name ->
        `containerd://<id>`), written by the test through pods/status as that kubelet
        would, so the daemon finds real containers."""
        started = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)
        since = started.isoformat().replace("+00:00", "Z")
        status = {
            "phase": "Running",
            "startTime": since,
            "conditions": [
                {"type": kind, "status": "True", "lastTransitionTime": since}
                for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": container,
                    "image": "game:1",
                    "imageID": "",
                    "containerID": container_id,
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": since}},
                }
                for container, container_id in container_ids.items()
            ],
        }
        await self.core.patch_namespaced_pod_status(name, NS, {"status": status})

    async def apply_marker(self, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        try:
            current = await self.custom.get_namespaced_custom_object(
                GROUP, VERSION, NS, PLURAL, name
            )
        except client.ApiException as err:
            if err.status != 404:
                raise
            await self.custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body)
            return
        body = {
            **body,
            "metadata": {
                **body["metadata"],
                "resourceVersion": current["metadata"]["resourceVersion"],
            },
        }
        await self.custom.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name, body)

    async def delete_marker(self, name: str) -> None:
        await self.custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)

    async def label(self, pod: str, labels: dict[str, str | None]) -> None:
        await self.core.patch_namespaced_pod(pod, NS, {"metadata": {"labels": labels}})

    def pod(self, name: str) -> dict[str, Any]:
        return self.sim.store.get(PODS, NS, name)

    async def wait_pod(
        self, name: str, predicate: Callable[[dict[str, Any]], bool], *, within: float = 10.0
    ) -> dict[str, Any]:
        return await self.sim.kubelet.wait_for_pod(NS, name, predicate, within=within)

    async def wait_event(self, reason: str, *, within: float = 10.0) -> dict[str, Any]:
        """The first event in the namespace with `reason`, once there is one."""
        with anyio.fail_after(within):
            watch = self.sim.store.watch(EVENTS, namespace=NS)
            try:
                async for event in watch:
                    if isinstance(event, WatchEvent) and event.object.get("reason") == reason:
                        return dict(event.object)
            finally:
                watch.close()
        raise AssertionError(f"the watch of events ended before a {reason} event")

    def events(self, reason: str) -> list[dict[str, Any]]:
        items = self.sim.store.list(EVENTS, namespace=NS).items
        return [e for e in items if e.get("reason") == reason]

    def pod_writes(self) -> int:
        return self.sim.accounting.count(verb="patch", resource="pods", subresource="status")


@contextlib.asynccontextmanager
async def history(world: World, name: str) -> AsyncIterator[list[dict[str, Any]]]:
    """Every version of pod `name` the API server stores from now on, in order."""
    seen: list[dict[str, Any]] = []
    watch = world.sim.store.watch(PODS, namespace=NS)

    async def follow() -> None:
        async for event in watch:
            if isinstance(event, WatchEvent) and event.object["metadata"]["name"] == name:
                seen.append(copy.deepcopy(dict(event.object)))

    async with anyio.create_task_group() as group:
        group.start_soon(follow)
        try:
            yield seen
        finally:
            watch.close()
            group.cancel_scope.cancel()


async def eventually(predicate: Callable[[], bool], *, within: float = 10.0) -> None:
    """Until `predicate()` holds (state inside the daemon, which has no event to await)."""
    with anyio.fail_after(within):
        while not predicate():  # noqa: ASYNC110 (no event to await: the daemon's state)
            await anyio.sleep(0.01)


def _container(name: str, ports: dict[str, dict[str, int]] | None) -> dict[str, Any]:
    declared = (ports or {}).get(name, {})
    container: dict[str, Any] = {"name": name, "image": "game:1"}
    if declared:
        container["ports"] = [{"name": n, "containerPort": p} for n, p in declared.items()]
    return container


def settings(sim: SimCluster, **over: Any) -> RunSettings:
    base = RunSettings(
        kubeconfig=str(sim.kubeconfig_path),
        node="node-1",
        write_coalesce_seconds=0.02,
        shutdown_grace_seconds=2.0,
        write_qps=100.0,
        write_burst=100,
        # A deleted marker is cleaned up at once here; the tests of the delay set it.
        cleanup_delay_seconds=0.0,
        # No health and metrics server (never the fixed default port in a test); the
        # tests of the server ask for one on 127.0.0.1:0.
        metrics_address="0",
    )
    return replace(base, **over)


@contextlib.asynccontextmanager
async def started_daemon(
    sim: SimCluster,
    *,
    health: HealthSettings | None = None,
    clock: Clock = MONOTONIC,
    **over: Any,
) -> AsyncIterator[Daemon]:
    """The real daemon, in-process, against `sim`, started but maybe not ready yet;
    stopped (gracefully) on exit."""
    run = settings(sim, **over)
    connection = await load_kubeconfig(sim.kubeconfig_path)
    async with KubeClient(connection, settings=client_settings(run)) as kube:
        daemon = Daemon(kube, run, clock=clock, health=health)
        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: daemon.run(stop=stop))
            try:
                yield daemon
            finally:
                stop.set()


@contextlib.asynccontextmanager
async def running_daemon(sim: SimCluster, **over: Any) -> AsyncIterator[Daemon]:
    """The real daemon, in-process, against `sim`, once ready; stopped on exit."""
    async with started_daemon(sim, **over) as daemon:
        with anyio.fail_after(10):
            await daemon.ready.wait()
        yield daemon
