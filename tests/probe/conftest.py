"""Fixtures for the probe stage against the sim: a running pod, a client, a runner.

The sim serves plain HTTP without auth (the client layer's tests cover HTTPS and
tokens); its exec runs commands as subprocesses on this host unless a test registers
a stream handler for exact frames.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import orjson
import pytest

from probemarker.api.model import ExecAction, ProbeSpec, Timing
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import load_kubeconfig
from probemarker.kube.connect.errors import RequestInfo
from probemarker.probe.exec import ExecHandler
from probemarker.probe.execstream import ExecSettings
from probemarker.probe.handler import ProbeTarget
from probemarker.probe.limits import EXEC_GRACE
from probemarker.probe.outcome import Outcome
from probemarker.probe.runner import ProbeRunner
from probemarker.sim import SimCluster
from probemarker.watch.pods import PodUID

NAMESPACE, POD = "default", "web"

_POD = orjson.dumps(
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD},
        "spec": {
            "nodeName": "node-1",
            "containers": [{"name": "app", "image": "busybox"}, {"name": "side", "image": "x"}],
        },
    }
)


@dataclass
class Probes:
    """A sim with one running pod, and the probe stage wired to it."""

    sim: SimCluster
    client: KubeClient
    uid: PodUID

    def target(self, *, pod: str = POD, container: str = "app") -> ProbeTarget:
        return ProbeTarget(NAMESPACE, pod, self.uid, container)

    async def run(
        self,
        *command: str,
        timeout_seconds: int = 10,
        pod: str = POD,
        container: str = "app",
        settings: ExecSettings | None = None,
        grace: float = EXEC_GRACE,
    ) -> Outcome:
        """One run through `ProbeRunner` and `ExecHandler`, as the engine makes it."""
        runner = ProbeRunner({ExecAction: ExecHandler(self.client, settings=settings, grace=grace)})
        spec = ProbeSpec(
            "check", container, ExecAction(command), Timing(timeout_seconds=timeout_seconds)
        )
        return await runner.run(spec, self.target(pod=pod, container=container))


@pytest.fixture
async def probes() -> AsyncIterator[Probes]:
    async with (
        SimCluster(node_names=("node-1",)) as sim,
        KubeClient(await load_kubeconfig(sim.kubeconfig_path)) as client,
    ):
        await client.request(
            "POST",
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            info=RequestInfo("create", "pods", namespace=NAMESPACE),
            body=_POD,
            content_type="application/json",
        )
        pod = await sim.kubelet.wait_running(NAMESPACE, POD)
        yield Probes(sim, client, PodUID(pod["metadata"]["uid"]))
