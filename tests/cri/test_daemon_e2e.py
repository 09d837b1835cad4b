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

import pytest
from kubernetes_asyncio import client

from probemarker.sim import SimCluster
from tests.cri.client import CRIClient
from tests.cri.runtime import StartContainer, kubelet_labels
from tests.integration.world import (
    NS,
    Script,
    World,
    condition,
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
