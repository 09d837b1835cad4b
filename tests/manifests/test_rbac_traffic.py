"""The daemon's ClusterRole against real traffic: the client layer's calls, made against
the sim over HTTPS with a bearer token, are checked with tests/rbac_check.py.

An administrator's setup (the CRD, a marker, pods on two nodes) goes first and is then
forgotten (`accounting.reset()`); what is left is what the daemon does: the pod informer
(this node's pods, by field selector), the marker informer, an exec, the writer's re-read
and status patch, and an event with a repeat. The role must allow every one of those
requests, and every permission it grants but one (`get` on podprobemarkers, which docs/security.md
lists and nothing uses yet) must be needed by one of them, so the check is not vacuous.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson

from probemarker.api.crd import build_crd
from probemarker.api.rules import GROUP, PLURAL, VERSION
from probemarker.kit.projection import IDENTITY_FIELDS, projector
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import load_kubeconfig
from probemarker.kube.connect.errors import RequestInfo
from probemarker.kube.watch.cache import ChangeKind
from probemarker.kube.watch.informer import PODS, Informer, Resource
from probemarker.kube.write.events import EventRecorder, ObjectRef
from probemarker.kube.write.ratelimit import TokenBucket
from probemarker.kube.write.statuswrite import patch_pod_status
from probemarker.probe.execresult import ExecExited
from probemarker.probe.execstream import run_exec
from probemarker.sim import SimCluster
from probemarker.sim.exec.runners import ExecReply, ExecRequest
from probemarker.sim.server.harness.accounting import RequestRecord
from probemarker.watch.pods import pod_projection
from tests.rbac_check import PolicyRule, disallowed, load_cluster_role

TOKEN = "probemarker-sa-token"
NODE = "node-1"
MARKERS = Resource(GROUP, VERSION, PLURAL)
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False)

# (verb, group, resource, subresource) of every request the daemon made here.
TRAFFIC = {
    ("list", "", "pods", ""),
    ("watch", "", "pods", ""),
    ("get", "", "pods", ""),
    ("patch", "", "pods", "status"),
    ("get", "", "pods", "exec"),
    ("create", "events.k8s.io", "events", ""),
    ("patch", "events.k8s.io", "events", ""),
    ("list", GROUP, PLURAL, ""),
    ("watch", GROUP, PLURAL, ""),
}
# Granted by docs/security.md without a caller today.
UNUSED = {(GROUP, PLURAL, "get")}


def pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "game"}},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "game"}]},
    }


MARKER = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "PodProbeMarker",
    "metadata": {"name": "idle"},
    "spec": {
        "selector": {"matchLabels": {"app": "game"}},
        "probes": [
            {
                "name": "idle",
                "containerName": "app",
                "probe": {"exec": {"command": ["true"]}},
                "podConditionType": "game.example.com/idle",
            }
        ],
    },
}


async def create(client: KubeClient, resource: Resource, body: dict[str, Any]) -> None:
    namespace = "default" if resource.namespaced else None
    await client.request(
        "POST",
        resource.path(namespace),
        info=resource.info("create", namespace),
        body=orjson.dumps(body),
        content_type="application/json",
    )


async def set_up(sim: SimCluster, client: KubeClient) -> None:
    """What an administrator does before the daemon starts; not the daemon's traffic."""
    await create(client, CRDS, build_crd())
    await create(client, MARKERS, MARKER)
    await create(client, PODS, pod("web", NODE))
    await create(client, PODS, pod("elsewhere", "node-2"))
    await sim.kubelet.wait_running("default", "web")

    async def exits_zero(request: ExecRequest) -> ExecReply:
        return ExecReply(exit_code=0, stdout=b"idle\n")

    sim.exec_handlers.register("default", "web", "app", exits_zero)
    sim.accounting.reset()


async def run_the_daemon_calls(sim: SimCluster, client: KubeClient) -> None:
    limiter = TokenBucket(qps=100.0, burst=100)
    pods = Informer(
        client=client,
        resource=PODS,
        project=pod_projection,
        field_selector=f"spec.nodeName={NODE}",
    )
    markers = Informer(client=client, resource=MARKERS, project=projector(IDENTITY_FIELDS))
    recorder = EventRecorder(client, node_name=NODE, limiter=limiter)
    # The receiving ends are closed with the test (the daemon reads both).
    with pods.changes, markers.changes:
        async with anyio.create_task_group() as group:
            for task in (pods.run, markers.run, recorder.run):
                group.start_soon(task)
            await pods.wait_synced()
            await markers.wait_synced()
            assert [p["metadata"]["name"] for p in pods.list()] == ["web"]
            assert [m["metadata"]["name"] for m in markers.list()] == ["idle"]
            await sim.accounting.wait_for(verb="watch", resource="pods")
            await sim.accounting.wait_for(verb="watch", resource=PLURAL)
            uid = await probe_and_write(client, pods, limiter)
            await record_an_event_twice(sim, recorder, uid)
            group.cancel_scope.cancel()


async def probe_and_write(
    client: KubeClient, pods: Informer[dict[str, Any]], limiter: TokenBucket
) -> str:
    """An exec probe, then the writer: a re-read (as after a 409) and one guarded patch
    of pods/status, which the pod watch brings back. Returns the pod's uid."""
    result = await run_exec(
        client,
        namespace="default",
        pod="web",
        container="app",
        command=["true"],
        time_limit=10,
        wait=20,
    )
    assert result == ExecExited(0, "idle\n", "", 0, 0)
    info = RequestInfo("get", "pods", namespace="default", name="web")
    stored = await client.request("GET", PODS.path("default", "web"), info=info)
    uid = str(stored["metadata"]["uid"])
    ops = [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "add", "path": "/metadata/labels/idle", "value": "true"},
    ]
    await patch_pod_status(client, namespace="default", name="web", ops=ops, limiter=limiter)
    async for change in pods.changes:
        labels = change.obj["metadata"].get("labels", {})
        if change.kind is ChangeKind.MODIFIED and labels.get("idle") == "true":
            break
    return uid


async def record_an_event_twice(sim: SimCluster, recorder: EventRecorder, uid: str) -> None:
    """A transition event (create), then its repeat (patch of the series)."""
    regarding = ObjectRef(kind="Pod", namespace="default", name="web", uid=uid)
    for verb in ("create", "patch"):
        recorder.record(
            regarding=regarding, type="Normal", reason="ProbeSucceeded", note="idle", action="Probe"
        )
        await sim.accounting.wait_for(verb=verb, resource="events")


def grants(rules: tuple[PolicyRule, ...]) -> list[tuple[str, str, str]]:
    return [
        (group, resource, verb)
        for rule in rules
        for group in rule.api_groups
        for resource in rule.resources
        for verb in rule.verbs
    ]


def without(rules: tuple[PolicyRule, ...], dropped: tuple[str, str, str]) -> list[PolicyRule]:
    """The rules split into one rule per (group, resource, verb), less `dropped`."""
    return [
        PolicyRule(verbs=(verb,), api_groups=(group,), resources=(resource,))
        for group, resource, verb in grants(rules)
        if (group, resource, verb) != dropped
    ]


def kinds(records: tuple[RequestRecord, ...]) -> set[tuple[str, str, str, str]]:
    return {(r.verb, r.group, r.resource, r.subresource) for r in records}


async def test_the_role_allows_every_request_the_client_layer_makes() -> None:
    with anyio.fail_after(30):
        async with (
            SimCluster(https=True, token=TOKEN, node_names=(NODE, "node-2")) as sim,
            KubeClient(await load_kubeconfig(sim.kubeconfig_path)) as client,
        ):
            await set_up(sim, client)
            await run_the_daemon_calls(sim, client)
            records = sim.accounting.records

    assert kinds(records) == TRAFFIC
    assert disallowed(records) == []

    rules = load_cluster_role()
    assert all(not rule.resource_names for rule in rules)  # `without` keeps no names
    needless = [
        granted
        for granted in grants(rules)
        if granted not in UNUSED and not disallowed(records, rules=without(rules, granted))
    ]
    assert needless == []
