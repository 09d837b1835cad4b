"""The daemon end to end on --exec-backend cri: sim pods whose status names real
containers, and a marker flipping their labels through containerd.

The sim stands in for the API server (markers, pods, status writes); the pods are
bound to a node its kubelet does not run, and the test writes their status as a
kubelet would, with the containerIDs of containers the tests' own CRI client started.
The daemon finds each container by that ID and runs the probe through ExecSync; the
test flips what the command answers inside the real container. No pods/exec reaches
the sim.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from kubernetes_asyncio import client
from structlog.testing import capture_logs

from probemarker.sim import SimCluster
from tests.cri.client import CRIClient
from tests.cri.runtime import Containers, StartContainer, kubelet_labels, start_with_prefix
from tests.integration.world import (
    NS,
    Script,
    World,
    condition,
    eventually,
    labels_of,
    marker,
    probe,
    running_daemon,
)

pytestmark = pytest.mark.cri

NODE = "cri-node"
STATE = "game.example.com/state"
IDLE = "game.example.com/idle"


@pytest.fixture
async def world() -> AsyncIterator[World]:
    async with (
        SimCluster(node_names=("node-1",)) as sim,
        client.ApiClient(sim.configuration()) as api,
    ):
        w = World(sim, api, Script())
        await w.install_crd()
        yield w


def state_probe() -> dict[str, object]:
    return probe(
        "state",
        action={"exec": {"command": ["cat", "/tmp/state"]}},
        condition=IDLE,
        succeeded={"labels": {STATE: "idle"}},
        failed={"labels": {STATE: "busy"}},
    )


def write_state(cri: CRIClient, container_id: str, text: str | None) -> None:
    script = "rm -f /tmp/state" if text is None else f"echo {text} > /tmp/state"
    answer = cri.exec_sync(container_id, ["sh", "-c", script], timeout=5)
    assert answer.exit_code == 0, answer.stderr


async def test_a_marker_flips_labels_of_real_containers_through_cri(
    world: World, cri: CRIClient, cri_endpoint: str, start_container: StartContainer
) -> None:
    ids = {}
    for name in ("gs-1", "gs-2"):
        pod = await world.create_bound_pod(name, node=NODE, labels={"app": "game"})
        # As the kubelet makes it: labelled with the pod's UID and the container's name.
        labels = kubelet_labels(uid=pod["metadata"]["uid"], container="app", namespace=NS, pod=name)
        ids[name] = start_container(name, labels=labels)
        await world.write_running_status(name, {"app": f"containerd://{ids[name]}"})
    first, second = ids["gs-1"], ids["gs-2"]
    write_state(cri, first, "idle")
    await world.apply_marker(marker("m", probes=[state_probe()]))
    async with running_daemon(world.sim, node=NODE, exec_backend="cri", cri_endpoint=cri_endpoint):
        idle = await world.wait_pod("gs-1", lambda p: labels_of(p).get(STATE) == "idle")
        busy = await world.wait_pod("gs-2", lambda p: labels_of(p).get(STATE) == "busy")
        write_state(cri, first, None)  # gs-1 gets busy, gs-2 idle
        write_state(cri, second, "idle")
        now_busy = await world.wait_pod("gs-1", lambda p: labels_of(p).get(STATE) == "busy")
        now_idle = await world.wait_pod("gs-2", lambda p: labels_of(p).get(STATE) == "idle")
    assert (condition(idle, IDLE) or {}).get("message") == "idle"
    assert (condition(busy, IDLE) or {}).get(
        "message"
    ) == "cat: can't open '/tmp/state': No such file or directory"
    assert (condition(now_busy, IDLE) or {}).get("status") == "False"
    assert (condition(now_idle, IDLE) or {}).get("status") == "True"
    assert world.sim.accounting.count(resource="pods", subresource="exec") == 0


def ran_in(cri: CRIClient, container_id: str) -> bool:
    """Whether a probe's command ran in the container (it leaves /tmp/ran)."""
    return cri.exec_sync(container_id, ["ls", "/tmp/ran"], timeout=5).exit_code == 0


async def test_a_pod_status_naming_a_prefix_labels_nothing_and_runs_nothing_anywhere(
    world: World, cri: CRIClient, cri_endpoint: str, cri_containers: Containers
) -> None:
    # Issue 22's attack, end to end: someone who may patch pods/status writes a prefix
    # of gs-1's container ID (one digit) into its status. containerd takes the prefix
    # for gs-1's container while it is the only match; once that container is gone,
    # for another pod's (namespace bank) whose ID starts with the same digit, whose
    # state says idle. Nothing may run in either, and gs-1 is labelled from neither.
    pod = await world.create_bound_pod("gs-1", node=NODE, labels={"app": "game"})
    ours = kubelet_labels(uid=pod["metadata"]["uid"], container="app", namespace=NS, pod="gs-1")
    own = cri_containers.start("gs-1", labels=ours)
    prefix = own[:1]
    assert cri.container_status(prefix).id == own  # containerd takes the prefix
    await world.write_running_status("gs-1", {"app": f"containerd://{prefix}"})
    traced = probe(
        "state",
        action={"exec": {"command": ["sh", "-c", "touch /tmp/ran; cat /tmp/state"]}},
        condition=IDLE,
        succeeded={"labels": {STATE: "idle"}},
        failed={"labels": {STATE: "busy"}},
    )
    await world.apply_marker(marker("m", probes=[traced]))
    theirs = kubelet_labels(uid="uid-of-vault", container="app", namespace="bank", pod="vault")
    with capture_logs() as logs:
        async with running_daemon(
            world.sim, node=NODE, exec_backend="cri", cri_endpoint=cri_endpoint
        ) as daemon:

            def exec_runs() -> int:
                return sum(n for (kind, _), n in daemon.engine.stats.runs.items() if kind == "exec")

            await eventually(lambda: exec_runs() >= 2, within=30)
            ran_in_own = ran_in(cri, own)
            await anyio.to_thread.run_sync(cri_containers.remove, own)
            bank = await anyio.to_thread.run_sync(
                lambda: start_with_prefix(cri_containers, prefix, name="vault", labels=theirs)
            )
            assert cri.container_status(prefix).id == bank  # the same string, bank's now
            write_state(cri, bank, "idle")
            after = exec_runs()
            await eventually(lambda: exec_runs() >= after + 2, within=30)
    gs1 = world.pod("gs-1")
    seen = {
        "label": labels_of(gs1).get(STATE),
        "condition": condition(gs1, IDLE),
        "ran in gs-1's container": ran_in_own,
        "ran in bank's container": ran_in(cri, bank),
        "exec results": {result for (kind, result) in daemon.engine.stats.runs if kind == "exec"},
    }
    assert seen == {
        "label": None,
        "condition": None,
        "ran in gs-1's container": False,
        "ran in bank's container": False,
        "exec results": {"Unknown"},
    }
    warned = [e for e in logs if e["event"] == "probe.cri_container_unusable"]
    assert [(e["pod"], e["container"]) for e in warned] == [(f"{NS}/gs-1", "app")]
    assert (
        f"containerID 'containerd://{prefix}' in the pod status is not a full"
        in (warned[0]["problem"])
    )
