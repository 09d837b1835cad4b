"""Review fixes of the simulated kubelet, exec and events against Kubernetes' behaviour.

Each test names the Kubernetes source the behaviour comes from.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.stream import WsApiClient

from probemarker.sim import SimCluster
from probemarker.sim.errors import Invalid
from probemarker.sim.kubelet.images import normalized_image
from probemarker.sim.server.discovery.catalog import EVENTS, PODS
from probemarker.sim.server.kinds.eventcheck import check_event_update
from probemarker.sim.server.kinds.qos import pod_qos_class
from tests.sim.server_helpers import HAVE_KUBECTL, pod_manifest, raw, run_kubectl


def conditions(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in pod["status"].get("conditions", [])}


async def pod_events_after(
    sim: SimCluster, name: str, resource_version: str, *, until: str, within: float = 3.0
) -> list[tuple[str, dict[str, Any]]]:
    """The pod's watch events after `resource_version`, up to the first of type `until`."""
    watch = sim.store.watch(
        PODS,
        namespace="default",
        field_selector=f"metadata.name={name}",
        resource_version=resource_version,
    )
    seen: list[tuple[str, dict[str, Any]]] = []
    try:
        async with asyncio.timeout(within):
            async for event in watch:
                seen.append((event.type, event.object))
                if event.type == until:
                    break
    finally:
        watch.close()
    return seen


async def test_conditions_of_others_come_first_and_stay(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    # status_manager.go mergePodStatus: non-kubelet conditions first, in stored order.
    await core.create_namespaced_pod("default", pod_manifest("order", labels={"a": "b"}))
    await sim.kubelet.wait_running("default", "order")
    await core.patch_namespaced_pod_status(
        "order",
        "default",
        [
            {
                "op": "add",
                "path": "/status/conditions/-",
                "value": {"type": "x.io/a", "status": "True"},
            }
        ],
    )
    patched = sim.store.get(PODS, "default", "order")
    assert patched["status"]["conditions"][-1]["type"] == "x.io/a"
    # isPodStatusByKubeletEqual: a change of others' conditions alone is not written over.
    # (the kubelet handles pod events in order: once a later pod runs, it saw the patch)
    await core.create_namespaced_pod("default", pod_manifest("later"))
    await sim.kubelet.wait_running("default", "later")
    same = sim.store.get(PODS, "default", "order")
    assert same["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    sim.kubelet.set_container_ready("default", "order", "app", False)
    pod = sim.store.get(PODS, "default", "order")
    assert [c["type"] for c in pod["status"]["conditions"]] == [
        "x.io/a",
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    assert pod["metadata"]["labels"] == {"a": "b"}


async def test_completed_init_container_is_ready_and_not_counted(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    # generate.go GenerateContainersReadyCondition skips non-restartable init containers;
    # prober_manager.go UpdatePodStatus: a completed (exit 0) init container is ready.
    manifest = pod_manifest("init", initContainers=[{"name": "setup", "image": "busybox"}])
    await core.create_namespaced_pod("default", manifest)
    pod = await sim.kubelet.wait_running("default", "init")
    (setup,) = pod["status"]["initContainerStatuses"]
    assert (setup["ready"], setup["started"]) == (True, False)
    assert conditions(pod)["ContainersReady"]["status"] == "True"
    assert conditions(pod)["Ready"]["status"] == "True"


async def test_probes_hold_started_and_ready(sim: SimCluster, core: client.CoreV1Api) -> None:
    # prober_manager.go UpdatePodStatus: started needs the startup probe, ready needs
    # started and the readiness probe; without probes both are true once running.
    probe = {"exec": {"command": ["true"]}}
    manifest = pod_manifest("probed")
    manifest["spec"]["containers"][0] |= {"startupProbe": probe, "readinessProbe": probe}
    await core.create_namespaced_pod("default", manifest)
    pod = await sim.kubelet.wait_running("default", "probed")
    (status,) = pod["status"]["containerStatuses"]
    assert (status["started"], status["ready"]) == (False, False)
    assert conditions(pod)["Ready"]["message"] == "containers with unready status: [app]"
    pod = sim.kubelet.set_container_ready("default", "probed", "app", True) or {}
    assert pod["status"]["containerStatuses"][0]["ready"] is False  # not started yet
    pod = sim.kubelet.set_container_started("default", "probed", "app") or {}
    (status,) = pod["status"]["containerStatuses"]
    assert (status["started"], status["ready"]) == (True, True)
    assert conditions(pod)["Ready"]["status"] == "True"


async def test_restart_is_two_writes_and_resets_probes(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    # kubelet_pods.go convertToAPIContainerStatuses: the dead container is state.terminated
    # until the new one runs; then lastState.terminated is the old container.
    manifest = pod_manifest("rs")
    manifest["spec"]["containers"][0]["readinessProbe"] = {"exec": {"command": ["true"]}}
    await core.create_namespaced_pod("default", manifest)
    await sim.kubelet.wait_running("default", "rs")
    pod = sim.kubelet.set_container_ready("default", "rs", "app", True) or {}
    before = pod["status"]["containerStatuses"][0]
    since = conditions(pod)["ContainersReady"]["lastTransitionTime"]
    rv = pod["metadata"]["resourceVersion"]
    sim.kubelet.restart_container("default", "rs", "app", exit_code=2, reason="Error")
    seen = await pod_events_after(sim, "rs", rv, until="MODIFIED")
    dead = seen[-1][1]
    (status,) = dead["status"]["containerStatuses"]
    assert status["state"]["terminated"]["containerID"] == before["containerID"]
    assert status["state"]["terminated"]["exitCode"] == 2
    assert (status["ready"], status["started"], status["restartCount"]) == (False, False, 0)
    assert conditions(dead)["ContainersReady"]["status"] == "False"
    assert dead["status"]["phase"] == "Running"
    now = sim.store.get(PODS, "default", "rs")
    (status,) = now["status"]["containerStatuses"]
    assert status["containerID"] != before["containerID"]
    assert status["restartCount"] == 1
    assert status["lastState"]["terminated"] == {
        "exitCode": 2,
        "reason": "Error",
        "startedAt": before["state"]["running"]["startedAt"],
        "finishedAt": status["state"]["running"]["startedAt"],
        "containerID": before["containerID"],
    }
    assert (status["started"], status["ready"]) == (True, False)  # readiness result reset
    pod = sim.kubelet.set_container_ready("default", "rs", "app", True) or {}
    assert conditions(pod)["ContainersReady"]["status"] == "True"
    assert conditions(pod)["ContainersReady"]["lastTransitionTime"] >= since


async def test_repeated_kubelet_events_are_counted(sim: SimCluster, core: client.CoreV1Api) -> None:
    # client-go tools/record EventLogger: an identical event bumps count and lastTimestamp.
    await core.create_namespaced_pod("default", pod_manifest("evc"))
    await sim.kubelet.wait_running("default", "evc")
    sim.kubelet.restart_container("default", "evc", "app")
    listed = sim.store.list(EVENTS, namespace="default").items
    started = [
        e for e in listed if e["reason"] == "Started" and e["involvedObject"]["name"] == "evc"
    ]
    assert len(started) == 1
    assert started[0]["count"] == 2
    assert started[0]["involvedObject"]["fieldPath"] == "spec.containers{app}"


async def test_deleted_pod_reaches_a_terminal_phase_before_removal(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    # kubelet_pods.go getPhase(podIsTerminal) and status_manager.go: Succeeded/Failed with
    # Ready/ContainersReady False (PodCompleted) before the kubelet's final delete.
    sim.kubelet.auto_finish_deletion = False
    await core.create_namespaced_pod("default", pod_manifest("bye"))
    await sim.kubelet.wait_running("default", "bye")
    await core.delete_namespaced_pod("bye", "default", grace_period_seconds=30)
    pod = sim.store.get(PODS, "default", "bye")
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    assert pod["status"]["phase"] == "Running"
    rv = pod["metadata"]["resourceVersion"]
    sim.kubelet.finish_deletion("default", "bye")
    seen = await pod_events_after(sim, "bye", rv, until="DELETED")
    assert [t for t, _ in seen] == ["MODIFIED", "DELETED"]
    final = seen[0][1]
    assert final["status"]["phase"] == "Succeeded"
    assert conditions(final)["Ready"]["reason"] == "PodCompleted"
    assert conditions(final)["PodReadyToStartContainers"]["status"] == "False"
    assert "terminated" in final["status"]["containerStatuses"][0]["state"]


async def test_failed_pod_conditions(sim: SimCluster, core: client.CoreV1Api) -> None:
    # generate.go generateContainersReadyConditionForTerminalPhase: reason PodFailed.
    await core.create_namespaced_pod("default", pod_manifest("fail", restartPolicy="Never"))
    await sim.kubelet.wait_running("default", "fail")
    pod = sim.kubelet.stop_container("default", "fail", "app", exit_code=1) or {}
    assert pod["status"]["phase"] == "Failed"
    assert conditions(pod)["Ready"]["reason"] == "PodFailed"
    assert conditions(pod)["ContainersReady"]["reason"] == "PodFailed"


async def ws_exec(sim: SimCluster, pod: str, command: list[str]) -> tuple[bytes, int | str]:
    """kubernetes_asyncio's WsApiClient exec (v4.channel.k8s.io), reading channel 3
    as its own `parse_error_data` does: (stdout, exit code or the Status message)."""
    async with WsApiClient(sim.configuration()) as ws_api:
        streaming = client.CoreV1Api(ws_api)
        connect = await streaming.connect_get_namespaced_pod_exec(
            pod,
            "default",
            command=command,
            stdout=True,
            stderr=True,
            stdin=False,
            tty=False,
            _preload_content=False,
        )
        out, outcome = b"", ""
        async with connect as ws:
            async for message in ws:
                data = message.data
                if data[:1] == b"\x01":
                    out += data[1:]
                elif data[:1] == b"\x03":
                    status = json.loads(data[1:])
                    try:
                        outcome = WsApiClient.parse_error_data(data[1:])
                    except ValueError:
                        outcome = status["message"]
        return out, outcome


async def test_ws_api_client_gets_exit_codes_and_runtime_errors(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    # kubelet cri/streaming/remotecommand ServeExec: Success, NonZeroExitCode with an
    # ExitCode cause, or InternalError for a command the runtime cannot start.
    await core.create_namespaced_pod("default", pod_manifest("ex"))
    await sim.kubelet.wait_running("default", "ex")
    assert await ws_exec(sim, "ex", ["sh", "-c", "echo hi"]) == (b"hi\n", 0)
    assert await ws_exec(sim, "ex", ["sh", "-c", "exit 3"]) == (b"", 3)
    _, missing = await ws_exec(sim, "ex", ["no-such-probe"])
    assert isinstance(missing, str)
    assert missing.startswith(
        "Internal error occurred: error executing command in container: failed to exec in "
        'container: failed to start exec "'
    )
    assert missing.endswith('exec: "no-such-probe": executable file not found in $PATH: unknown')


async def test_exec_into_a_terminating_pod_runs_until_its_containers_stop(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    # The apiserver does not refuse exec into a pod with a deletionTimestamp; the kubelet
    # execs while the container runs; once the pod is gone the apiserver answers 404.
    sim.kubelet.auto_finish_deletion = False
    await core.create_namespaced_pod("default", pod_manifest("term"))
    await sim.kubelet.wait_running("default", "term")
    await core.delete_namespaced_pod("term", "default", grace_period_seconds=30)
    assert await ws_exec(sim, "term", ["true"]) == (b"", 0)
    sim.kubelet.finish_deletion("default", "term")
    status, body = await raw(
        sim,
        "GET",
        "/api/v1/namespaces/default/pods/term/exec?command=true&stdout=1",
        headers={"Connection": "Upgrade", "Upgrade": "websocket"},
    )
    assert (status, body["reason"]) == (404, "NotFound")


def test_core_event_update_keeps_legacy_checks_only() -> None:
    # validation/events.go ValidateEventUpdate: core/v1 may change count/lastTimestamp.
    old = {
        "metadata": {"name": "e", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
        "reason": "ProbeFailed",
        "count": 1,
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }
    check_event_update(
        old | {"count": 2, "lastTimestamp": "2026-01-01T00:01:00Z"}, old, strict=False
    )
    moved = old | {"involvedObject": {"kind": "Pod", "namespace": "other", "name": "p"}}
    with pytest.raises(Invalid) as invalid:
        check_event_update(moved, old, strict=False)
    assert invalid.value.to_status()["message"] == (
        'Event "e" is invalid: involvedObject.namespace: Invalid value: "other": '
        "does not match event.namespace"
    )


def test_events_v1_update_holds_fields_immutable_but_series_may_grow() -> None:
    old = {
        "metadata": {"name": "e", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingComponent": "probemarker.io/daemon",
        "reportingInstance": "node-1",
        "action": "Probe",
        "reason": "ProbeFailed",
        "message": "down",
        "type": "Warning",
    }
    grown = old | {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"}}
    check_event_update(grown, old, strict=True)
    with pytest.raises(Invalid) as invalid:
        check_event_update(grown | {"series": {"count": 1}, "message": "up"}, old, strict=True)
    message = invalid.value.to_status()["message"]
    assert message.startswith('Event.events.k8s.io "e" is invalid: [series.count: Invalid value')
    assert 'message: Invalid value: "up": field is immutable' in message
    assert "series.lastObservedTime: Required value" in message


@pytest.mark.parametrize(
    ("image", "reported"),
    [
        ("busybox", "docker.io/library/busybox:latest"),
        ("busybox:1.36", "docker.io/library/busybox:1.36"),
        ("me/app:1", "docker.io/me/app:1"),
        ("ghcr.io/x/y", "ghcr.io/x/y:latest"),
        ("localhost:5000/a:2", "localhost:5000/a:2"),
        ("nginx@sha256:abc", "docker.io/library/nginx@sha256:abc"),
    ],
)
def test_container_status_image_is_normalized_like_containerd(image: str, reported: str) -> None:
    assert normalized_image(image) == reported


async def test_https_kubeconfig_verifies_the_ca_for_ip_and_localhost(tmp_path: Path) -> None:
    # kube-apiserver serving certificates carry 127.0.0.1/localhost SANs; the kubeconfig's
    # CA is what kubernetes_asyncio verifies against; a wrong token is a 401 Status.
    async with SimCluster(https=True, token="s3cret") as sim:
        for host in ("127.0.0.1", "localhost"):
            config = client.Configuration()
            await kube_config.load_kube_config(
                config_file=str(sim.kubeconfig_path), client_configuration=config
            )
            assert config.verify_ssl
            config.host = config.host.replace("127.0.0.1", host)
            async with client.ApiClient(config) as api:
                namespaces = await client.CoreV1Api(api).list_namespace()
            assert "default" in [n.metadata.name for n in namespaces.items]
        untrusting = client.Configuration(host=sim.url)
        async with client.ApiClient(untrusting) as api:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await client.CoreV1Api(api).list_namespace()
        async with aiohttp.ClientSession() as session:
            ssl_context = ssl.create_default_context(cafile=str(sim.ca_path))
            async with session.get(
                sim.url + "/api/v1/namespaces",
                headers={"Authorization": "Bearer wrong"},
                ssl=ssl_context,
            ) as denied:
                body = await denied.json()
        assert denied.status == 401
        assert body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }


async def test_first_status_is_pending_container_creating_then_running(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    # kubelet_pods.go convertToAPIContainerStatuses: default waiting state
    # (ContainerCreating, PodInitializing with init containers), statuses sorted by
    # name, lastState {} and volumeMounts from the spec; generate.go Initialized.
    rv = sim.store.list(PODS).resource_version
    manifest = pod_manifest(
        "boot",
        initContainers=[{"name": "setup", "image": "busybox"}],
        containers=[
            {"name": "zeta", "image": "busybox"},
            {
                "name": "alpha",
                "image": "nginx:1.27",
                "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg", "readOnly": True}],
            },
        ],
        volumes=[{"name": "cfg", "emptyDir": {}}],
    )
    await core.create_namespaced_pod("default", manifest)
    await sim.kubelet.wait_running("default", "boot")
    seen = await pod_events_after(sim, "boot", rv, until="ADDED")
    seen += await pod_events_after(
        sim, "boot", seen[-1][1]["metadata"]["resourceVersion"], until="MODIFIED"
    )
    first = seen[-1][1]["status"]
    assert first["phase"] == "Pending"
    assert "podIP" not in first
    assert first["hostIP"] == "127.0.0.1"
    assert [c["name"] for c in first["containerStatuses"]] == ["alpha", "zeta"]
    alpha = first["containerStatuses"][0]
    assert alpha["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert (alpha["image"], alpha["imageID"], alpha["lastState"]) == ("nginx:1.27", "", {})
    assert "containerID" not in alpha
    assert alpha["volumeMounts"] == [
        {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": True, "recursiveReadOnly": "Disabled"}
    ]
    by_type = {c["type"]: c for c in first["conditions"]}
    assert by_type["Initialized"]["message"] == "containers with incomplete status: [setup]"
    assert by_type["PodReadyToStartContainers"]["status"] == "False"
    running = sim.store.get(PODS, "default", "boot")["status"]
    assert [c["name"] for c in running["containerStatuses"]] == ["alpha", "zeta"]
    assert running["containerStatuses"][0]["image"] == "docker.io/library/nginx:1.27"
    assert running["containerStatuses"][1]["lastState"] == {}


async def test_killed_at_grace_end_is_failed(sim: SimCluster, core: client.CoreV1Api) -> None:
    # getPhase(podIsTerminal): any container not exiting 0 makes the pod Failed.
    sim.kubelet.auto_finish_deletion = False
    await core.create_namespaced_pod("default", pod_manifest("kill"))
    pod = await sim.kubelet.wait_running("default", "kill")
    await core.delete_namespaced_pod("kill", "default")
    rv = sim.store.get(PODS, "default", "kill")["metadata"]["resourceVersion"]
    sim.kubelet.finish_deletion("default", "kill", exit_code=137)
    seen = await pod_events_after(sim, "kill", rv, until="DELETED")
    final = seen[0][1]
    assert final["status"]["phase"] == "Failed"
    terminated = final["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "Error")
    assert terminated["containerID"] == pod["status"]["containerStatuses"][0]["containerID"]
    assert conditions(final)["Ready"]["reason"] == "PodFailed"


async def test_node_object_is_what_a_kubelet_registers(core: client.CoreV1Api) -> None:
    # kubelet nodestatus/setters.go: the four conditions in order, capacity/allocatable.
    node = await core.read_node("node-1")
    assert [c.type for c in node.status.conditions] == [
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
    ]
    assert node.status.allocatable["pods"] == "110"
    assert node.status.daemon_endpoints.kubelet_endpoint.port == 10250
    assert node.metadata.labels["kubernetes.io/arch"] == "amd64"


@pytest.mark.skipif(not HAVE_KUBECTL, reason="kubectl is not installed")
async def test_kubectl_describe_shows_counted_and_series_events(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    # kubectl describe's DescribeEvents: "(xN over ...)" from series.count or count,
    # From = source.component, else reportingController.
    await core.create_namespaced_pod("default", pod_manifest("desc"))
    pod = await sim.kubelet.wait_running("default", "desc")
    sim.kubelet.restart_container("default", "desc", "app")
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "desc.probe"},
        "regarding": {
            "kind": "Pod",
            "namespace": "default",
            "name": "desc",
            "uid": pod["metadata"]["uid"],
            "apiVersion": "v1",
        },
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "series": {"count": 3, "lastObservedTime": "2026-01-01T00:01:00.000000Z"},
        "reportingController": "probemarker.io/daemon",
        "reportingInstance": "node-1",
        "action": "Probe",
        "reason": "ProbeFailed",
        "note": "upstream unreachable",
        "type": "Warning",
    }
    status, _ = await raw(
        sim, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", json=event
    )
    assert status == 201
    described = await run_kubectl(sim.kubeconfig_path, "describe", "pod", "desc")
    assert described.code == 0, described.err
    lines = described.out.splitlines()
    probe = next(line for line in lines if "ProbeFailed" in line)
    assert "(x3 over" in probe
    assert "probemarker.io/daemon" in probe
    started = next(line for line in lines if "Started container app" in line)
    assert "(x2 over" in started
    assert "kubelet" in started
    assert any(line.split() == ["Restart", "Count:", "1"] for line in lines)


def _with_resources(*resources: dict[str, Any]) -> dict[str, Any]:
    containers = [
        {"name": f"c{i}", "image": "busybox", "resources": r} for i, r in enumerate(resources)
    ]
    return {"spec": {"containers": containers}}


@pytest.mark.parametrize(
    ("resources", "qos"),
    [
        (({},), "BestEffort"),
        (({"limits": {"cpu": "1", "memory": "1Gi"}},), "Guaranteed"),
        (
            (
                {
                    "requests": {"cpu": "1000m", "memory": "1024Mi"},
                    "limits": {"cpu": "1", "memory": "1Gi"},
                },
            ),
            "Guaranteed",
        ),
        (({"requests": {"cpu": "100m"}},), "Burstable"),
        (({"limits": {"cpu": "1", "memory": "1Gi"}}, {}), "Burstable"),
        (({"requests": {"cpu": "0"}},), "BestEffort"),
    ],
)
def test_qos_class_follows_get_pod_qos(resources: tuple[dict[str, Any], ...], qos: str) -> None:
    # pkg/apis/core/v1/helper/qos GetPodQOS
    assert pod_qos_class(_with_resources(*resources)) == qos


async def test_kubelet_reports_the_computed_qos_class(
    sim: SimCluster, core: client.CoreV1Api
) -> None:
    manifest = pod_manifest("gq")
    manifest["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    await core.create_namespaced_pod("default", manifest)
    pod = await sim.kubelet.wait_running("default", "gq")
    assert pod["status"]["qosClass"] == "Guaranteed"


def test_event_note_limit_counts_bytes_as_go_len_does() -> None:
    """validation/events.go: `len(event.Note) > NoteLengthLimit`, Go's len() counts bytes."""
    from probemarker.sim.server.kinds.eventcheck import check_event_create

    event = {
        "metadata": {"name": "e", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
        "reason": "ProbeFailed",
        "action": "Probe",
        "reportingComponent": "probemarker.io/daemon",
        "reportingInstance": "node-1",
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "type": "Warning",
    }
    check_event_create(event | {"message": "é" * 512}, strict=True)  # 1024 bytes
    with pytest.raises(Invalid, match='message: Invalid value: "": can have at most 1024'):
        check_event_create(event | {"message": "é" * 513}, strict=True)  # 513 characters
