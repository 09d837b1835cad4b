"""Setting the simulated cluster up for the demo, as a user would with kubectl.

Stage: demo edge (I/O against the sim's API over HTTP, with kubernetes_asyncio, not
the daemon's client, so the demo acts as an outsider). Input: a running `SimCluster`,
the demo's pods and the example markers. Output: the CRD installed, the examples'
namespaces created, the pods running (each container's exec answered by `MappedExec`,
its files written), the markers applied; and the pods' IPs. Also `daemon_logs`: the
daemon's and the sim's log lines go to a file while the demo draws on the terminal.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import structlog
from kubernetes_asyncio import client

from probemarker.api import rules
from probemarker.api.crd import build_crd
from probemarker.demo.containers import ContainerFiles, DemoError, MappedExec
from probemarker.demo.examples import Example
from probemarker.demo.scenario import DemoPod
from probemarker.observe.logging import configure_logging
from probemarker.sim import SimCluster
from probemarker.sim.exec.runners import SubprocessRunner


def pod_body(pod: DemoPod, *, node: str, http_port: int) -> dict[str, Any]:
    """The Pod object for `pod`, bound to `node`."""
    container: dict[str, Any] = {"name": pod.container, "image": pod.image}
    if pod.serves_http:
        container["ports"] = [{"name": "http", "containerPort": http_port}]
    spec: dict[str, Any] = {
        "nodeName": node,
        "terminationGracePeriodSeconds": 1,
        "containers": [container],
    }
    if pod.readiness_gate:
        spec["readinessGates"] = [{"conditionType": pod.readiness_gate}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "labels": dict(pod.labels)},
        "spec": spec,
    }


async def install_crd(api: client.ApiClient) -> None:
    crd: Any = build_crd()
    await client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)


async def create_namespaces(api: client.ApiClient, names: Iterable[str]) -> None:
    core = client.CoreV1Api(api)
    for name in dict.fromkeys(names):
        body: Any = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        await core.create_namespace(body)


async def create_pods(
    api: client.ApiClient,
    sim: SimCluster,
    files: ContainerFiles,
    pods: Sequence[DemoPod],
    *,
    node: str,
    http_port: int,
) -> dict[str, str]:
    """Create the pods with their files and exec handlers; their IPs once running."""
    core = client.CoreV1Api(api)
    runner = SubprocessRunner()
    for pod in pods:
        files.create(pod)
        sim.exec_handlers.register_stream(
            pod.namespace, pod.name, pod.container, MappedExec(files, pod, runner)
        )
        body: Any = pod_body(pod, node=node, http_port=http_port)
        await core.create_namespaced_pod(pod.namespace, body)
    ips = {}
    for pod in pods:
        running = await sim.kubelet.wait_running(pod.namespace, pod.name, within=10)
        ips[pod.key] = str(running["status"]["podIP"])
    return ips


async def apply_markers(api: client.ApiClient, examples: Iterable[Example]) -> None:
    custom = client.CustomObjectsApi(api)
    for example in examples:
        body: Any = dict(example.body)
        await custom.create_namespaced_custom_object(
            rules.GROUP, rules.VERSION, example.namespace, rules.PLURAL, body
        )


@contextlib.contextmanager
def daemon_logs(path: Path) -> Iterator[None]:
    """Within the block, structlog (the daemon) and stdlib logging (the sim, aiohttp)
    write to `path`, JSON lines and text lines; before and after, as they were."""
    saved = structlog.get_config()
    root = logging.getLogger()
    try:
        opened = path.open("a", encoding="utf-8")
    except OSError as err:
        raise DemoError(
            f"cannot open the log file {path}: {err.strerror or err}; "
            "name a file in a directory that exists (--log-file FILE)"
        ) from err
    with opened as stream:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        configure_logging(format="json", level="info", stream=stream)
        try:
            yield
        finally:
            root.removeHandler(handler)
            structlog.configure(**saved)
