"""--exec-backend cri end to end: the real daemon against the sim, exec probes through a
scripted container runtime on a unix socket (tests/probe/criserver.py).

The pods are bound to a node the sim's kubelet does not run, and their status is
written by the test as a kubelet would, naming containerIDs; the daemon finds the
container by that ID and asks the runtime, never the API server's pods/exec (the sim
counts no exec). The same flow against real containerd containers is tests/cri/'s.
A runtime that goes away (containerd restarted: the daemon's mount of its socket goes
stale) changes nothing on the pods and fails /healthz past its bound.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from structlog.testing import capture_logs

from probemarker.observe.health import HealthSettings
from tests.cri.runtime import kubelet_labels
from tests.integration.world import (
    World,
    condition,
    eventually,
    labels_of,
    marker,
    probe,
    running_daemon,
)
from tests.probe.criserver import Runtime, serve

NODE = "cri-node"
ID = "ab" * 32


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[tuple[Runtime, str]]:
    scripted = Runtime()
    socket = tmp_path / "cri.sock"
    server = await serve(scripted, socket)
    yield scripted, f"unix://{socket}"
    await server.stop(grace=None)


def state_probe() -> dict[str, object]:
    return probe(
        "state",
        command="state",
        condition="game.example.com/idle",
        succeeded={"labels": {"game.example.com/state": "idle"}},
        failed={"labels": {"game.example.com/state": "busy"}},
    )


def execs(world: World) -> int:
    return world.sim.accounting.count(resource="pods", subresource="exec")


async def test_a_marker_flips_labels_through_the_runtime(
    world: World, runtime: tuple[Runtime, str]
) -> None:
    scripted, endpoint = runtime
    pod = await world.create_bound_pod("gs-1", node=NODE, labels={"app": "game"})
    meta = pod["metadata"]  # what the runtime says of the container: the kubelet's labels
    scripted.labels = kubelet_labels(
        uid=meta["uid"], container="app", namespace=meta["namespace"], pod=meta["name"]
    )
    await world.write_running_status("gs-1", {"app": f"containerd://{ID}"})
    await world.apply_marker(marker("m", probes=[state_probe()]))
    async with running_daemon(world.sim, node=NODE, exec_backend="cri", cri_endpoint=endpoint):
        idle = await world.wait_pod(
            "gs-1", lambda p: labels_of(p).get("game.example.com/state") == "idle"
        )
        scripted.state = ""  # the command now exits 1
        busy = await world.wait_pod(
            "gs-1", lambda p: labels_of(p).get("game.example.com/state") == "busy"
        )
    assert (condition(idle, "game.example.com/idle") or {}).get("message") == "idle"
    assert (condition(busy, "game.example.com/idle") or {}).get("status") == "False"
    assert {r.container_id for r in scripted.requests} == {ID}
    assert {tuple(r.cmd) for r in scripted.requests} == {("state",)}
    assert execs(world) == 0  # not one pods/exec: the API server is not on the path


async def test_a_runtime_that_is_down_changes_nothing_on_the_pod(
    world: World, tmp_path: Path
) -> None:
    endpoint = f"unix://{tmp_path / 'absent.sock'}"
    await world.create_bound_pod("gs-1", node=NODE, labels={"app": "game"})
    await world.write_running_status("gs-1", {"app": f"containerd://{ID}"})
    await world.apply_marker(marker("m", probes=[state_probe()]))
    written = world.pod_writes()  # the test's own status write, as the kubelet's
    with capture_logs() as logs:
        async with running_daemon(
            world.sim, node=NODE, exec_backend="cri", cri_endpoint=endpoint
        ) as daemon:
            await eventually(lambda: daemon.engine.stats.runs[("exec", "Unknown")] >= 3)
    assert labels_of(world.pod("gs-1")).get("game.example.com/state") is None
    assert condition(world.pod("gs-1"), "game.example.com/idle") is None
    assert world.pod_writes() == written
    (greeting,) = [e for e in logs if e["event"] == "cri.unreachable"]
    assert greeting["endpoint"] == endpoint
    assert "UNAVAILABLE" in greeting["error"]


async def test_the_start_up_line_names_the_runtime(
    world: World, runtime: tuple[Runtime, str]
) -> None:
    _, endpoint = runtime
    with capture_logs() as logs:
        async with running_daemon(world.sim, node=NODE, exec_backend="cri", cri_endpoint=endpoint):
            await eventually(lambda: any(e["event"] == "cri.runtime" for e in logs))
    (line,) = [e for e in logs if e["event"] == "cri.runtime"]
    assert (line["runtime"], line["version"], line["api"]) == ("containerd", "9.9", "v1")


async def test_a_runtime_gone_changes_nothing_on_the_pod_and_fails_healthz_past_its_bound(
    world: World, tmp_path: Path
) -> None:
    """The daemon's side of tests/cluster/test_disruption.py's containerd restart: once
    the runtime that answered stops answering, exec probes are Unknown (the pod keeps
    what it shows), and /healthz fails once every call has been refused for longer
    than its bound (60 s in a DaemonSet, 1 s here), naming the endpoint: the kubelet's
    liveness probe then restarts the daemon onto the new socket."""
    scripted, socket = Runtime(), tmp_path / "cri.sock"
    server = await serve(scripted, socket)
    try:
        pod = await world.create_bound_pod("gs-1", node=NODE, labels={"app": "game"})
        meta = pod["metadata"]
        scripted.labels = kubelet_labels(
            uid=meta["uid"], container="app", namespace=meta["namespace"], pod=meta["name"]
        )
        await world.write_running_status("gs-1", {"app": f"containerd://{ID}"})
        await world.apply_marker(marker("m", probes=[state_probe()]))
        async with running_daemon(
            world.sim,
            node=NODE,
            exec_backend="cri",
            cri_endpoint=f"unix://{socket}",
            metrics_address="127.0.0.1:0",
            health=HealthSettings(runtime_refused_max=1.0),
        ) as daemon:
            await world.wait_pod(
                "gs-1", lambda p: labels_of(p).get("game.example.com/state") == "idle"
            )
            writes, unknown = world.pod_writes(), daemon.engine.stats.runs[("exec", "Unknown")]
            await server.stop(grace=None)
            scripted.state = ""  # it would fail now, could the daemon ask
            await eventually(lambda: not daemon.health.liveness().ok, within=10)
            assert daemon.engine.stats.runs[("exec", "Unknown")] > unknown
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{daemon.metrics_port}/healthz") as response,
            ):
                assert response.status == 503
                said = await response.text()
            assert f"container runtime at unix://{socket}: every call refused for" in said
            assert world.pod_writes() == writes
            assert labels_of(world.pod("gs-1"))["game.example.com/state"] == "idle"
    finally:
        await server.stop(grace=None)
