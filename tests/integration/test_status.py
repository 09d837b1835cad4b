"""`probemarker status` against the real daemon on the sim (issue 34): what the daemon
holds, on its status socket and through pods/exec into a daemon pod, agrees with
the pods; a node whose daemon is missing, not running or unreachable is named; and the
whole path as processes (`probemarker run` with its socket, the admin's `probemarker
status` execing `probemarker status --local` into the daemon's pod)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
from kubernetes_asyncio import client

from probemarker.daemon.app import Daemon
from probemarker.kube.connect.config import ConnectionSettings
from probemarker.observe.snapshot import SNAPSHOT_VERSION
from probemarker.observe.statussocket import StatusRequest
from probemarker.sim.exec.runners import DEFAULT_PATH, ExecIO, ExecReply, ExecRequest
from probemarker.status.read import StatusOptions, read_cluster, read_local_socket, read_socket
from probemarker.status.render import exit_code, render_json, render_text
from tests.integration import process
from tests.integration.world import (
    NS,
    OWNED,
    World,
    annotations_of,
    eventually,
    flag,
    labels_of,
    marker,
    running_daemon,
)

DAEMONS = "probemarker-system"
ROOT = str(Path(__file__).resolve().parents[2])  # the checkout, for the command's subprocess


class Hang:
    """A command that outlives its stream (held by the daemon) until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def __call__(self, request: ExecRequest, io: ExecIO) -> int:
        await self.release.wait()
        return 0


def owned(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod's ownership record (empty: none)."""
    record: dict[str, Any] = json.loads(annotations_of(pod).get(OWNED, "{}"))
    return record


def rows(document: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(pod, marker/probe) -> the probe's row."""
    return {
        (p["name"], f"{r['marker'].rpartition('/')[2]}/{r['probe']}"): r
        for p in document["pods"]
        for r in p["probes"]
    }


async def status_of(path: str, **options: Any) -> dict[str, Any]:
    answer = await read_socket(path, StatusOptions(**options))
    document: dict[str, Any] = json.loads(answer)
    assert document["apiVersion"] == SNAPSHOT_VERSION
    return document


@contextlib.asynccontextmanager
async def on_node(world: World, tmp_path: Path) -> AsyncIterator[tuple[World, Daemon, Hang]]:
    """Pods on node-1 in each situation `status` names, and one on node-2; the daemon
    with its status socket."""
    hang = Hang()
    world.script.set("waits", "app", "check", ExecReply(1, b"", b"not yet\n"))
    for name in ("waits", "held", "nosidecar"):
        await world.create_pod(name, labels={"app": "game"})
    world.sim.exec_handlers.register_stream(NS, "held", "app", hang)
    await world.create_bound_pod("elsewhere", node="node-2", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle", failure=100, timeout=1)]))
    await world.apply_marker(marker("side", probes=[flag("ready", container="sidecar")]))
    socket = str(tmp_path / "status.sock")
    try:
        async with running_daemon(world.sim, status_socket=socket) as daemon:
            yield world, daemon, hang
    finally:
        hang.release.set()


async def test_status_agrees_with_the_pods(world: World, tmp_path: Path) -> None:
    async with on_node(world, tmp_path) as (_, daemon, _):
        await agrees(world, daemon)


async def agrees(world: World, daemon: Daemon) -> None:
    socket = daemon.settings.status_socket
    await world.wait_pod("nosidecar", lambda p: labels_of(p).get("idle") == "yes")
    assert daemon.exec is not None
    holds = daemon.exec.holds
    await eventually(lambda: holds.held == 1)  # held's command outlived its timeout
    await eventually(lambda: daemon.engine.stats.periods_skipped >= 1)  # and is held
    # on the pod's record since that first skipped run (issue 43), in a write of its own
    await world.wait_pod("held", lambda p: "h" in owned(p).get("m#idle", {}))
    document = await status_of(socket)
    assert (document["node"], document["ready"]) == ("node-1", True)
    found = rows(document)
    assert {pod for pod, _ in found} == {"waits", "held", "nosidecar"}  # not "elsewhere"
    waits = found[("waits", "m/idle")]
    assert waits["state"] is None  # waiting for its threshold, which the pod agrees with
    assert "idle" not in labels_of(world.pod("waits"))
    assert waits["count"]["result"] == "Failed"
    assert waits["count"]["threshold"] == 100
    assert waits["count"]["runs"] >= 1
    assert (waits["last"]["result"], waits["last"]["message"]) == ("Failed", "not yet")
    assert waits["next"] is not None or waits["running"]
    held = found[("held", "m/idle")]
    assert held["waiting"]["reason"] == "CommandHeld"
    assert held["last"]["result"] == "Failed"  # its timeout, counted
    assert held["count"]["runs"] == 1  # and no run since: its periods are skipped
    missing = found[("nosidecar", "side/ready")]
    assert missing["waiting"]["reason"] == "ContainerMissing"
    assert missing["last"] is None
    ok = found[("nosidecar", "m/idle")]
    assert ok["state"] == "Succeeded"
    assert ok["last"]["values"]["labels"]["idle"]["value"] == "yes"
    assert ok["last"]["values"]["annotations"] == {}
    assert all(p["write"] is None for p in document["pods"])  # every pod written
    # Filters: the daemon answers only what was asked.
    only = await status_of(socket, pod=f"{NS}/waits", marker=f"{NS}/m")
    assert list(rows(only)) == [("waits", "m/idle")]


async def test_the_command_reads_the_socket_and_says_what_is_not_decided(
    world: World, tmp_path: Path
) -> None:
    async with on_node(world, tmp_path) as (_, daemon, _):
        await command(world, daemon)


async def command(world: World, daemon: Daemon) -> None:
    socket = daemon.settings.status_socket
    await world.wait_pod("nosidecar", lambda p: labels_of(p).get("idle") == "yes")
    env = {**os.environ, "PYTHONPATH": ROOT}
    with anyio.fail_after(30):
        text = await anyio.run_process(
            [sys.executable, "-m", "probemarker", "status", "--socket", socket],
            check=False,
            env=env,
        )
        filtered = await anyio.run_process(
            [
                sys.executable,
                "-m",
                "probemarker",
                "status",
                "--socket",
                socket,
                "--pod",
                f"{NS}/nosidecar",
                "--marker",
                f"{NS}/m",
                "-o",
                "json",
            ],
            check=False,
            env=env,
        )
        local = await anyio.run_process(
            [sys.executable, "-m", "probemarker", "status", "--local", "--pod", f"{NS}/waits"],
            check=False,
            env={**env, "PROBEMARKER_STATUS_SOCKET": socket},
        )
        settled = await anyio.run_process(
            [
                sys.executable,
                "-m",
                "probemarker",
                "status",
                "--socket",
                socket,
                "--pod",
                f"{NS}/nosidecar",
            ],
            check=False,
            env=env,
        )
        usage = await anyio.run_process(
            [
                sys.executable,
                "-m",
                "probemarker",
                "status",
                "--socket",
                socket,
                "--pod",
                "nosidecar",
            ],
            check=False,
            env=env,
        )
    lines = text.stdout.decode().splitlines()
    assert text.returncode == 1, text.stdout + text.stderr  # waits and held: undecided
    assert lines[0].split() == ["POD", "MARKER/PROBE", "STATE", "COUNT", "LAST", "NEXT", "MESSAGE"]
    assert any(line.startswith(f"{NS}/nosidecar") and "ContainerMissing" in line for line in lines)
    assert not any("elsewhere" in line for line in lines)
    assert filtered.returncode == 0, filtered.stderr  # decided and written
    # Its other probe's container is not in the pod's spec: settled (issue 40), as only
    # a new pod could change it; the row still says so.
    assert settled.returncode == 0, settled.stdout + settled.stderr
    assert b"ContainerMissing" in settled.stdout
    shown = json.loads(filtered.stdout)
    assert shown["apiVersion"] == "probemarker.io/status-list/v2"
    ((pod,),) = [n["pods"] for n in shown["nodes"]]
    assert [r["probe"] for r in pod["probes"]] == ["idle"]
    # --local (what runs in the daemon's container) prints the daemon's answer as it is
    assert local.returncode == 0, local.stderr
    raw = json.loads(local.stdout)
    assert raw["apiVersion"] == SNAPSHOT_VERSION
    assert [p["name"] for p in raw["pods"]] == ["waits"]
    assert usage.returncode == 2
    assert b"--pod 'nosidecar': expected NAMESPACE/NAME" in usage.stderr


async def test_a_pending_write_under_a_throttled_budget(world: World, tmp_path: Path) -> None:
    for i in range(3):
        await world.create_pod(f"g{i}", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle")]))
    socket = str(tmp_path / "status.sock")
    # One write, then one per 100 s: the second and third pods wait for the budget.
    async with running_daemon(
        world.sim, status_socket=socket, write_qps=0.01, write_burst=1, shutdown_grace_seconds=0.2
    ) as daemon:
        # Two pods decided, past their coalescing window, their flushes due (the writer
        # itself waits for the next token, their turns to come).
        def due() -> list[str]:
            answer = json.loads(daemon.status(StatusRequest()))
            writes = [p["write"] for p in answer["pods"] if p["write"] is not None]
            return [w["waits"] for w in writes]

        await eventually(lambda: due() == ["WriteBudget"] * 2)
        written = [f"g{i}" for i in range(3) if labels_of(world.pod(f"g{i}")).get("idle") == "yes"]
        assert len(written) == 1  # the one token
        # Through the socket: a snapshot taken while the writer re-plans a pod (its probes
        # run every second, all three at one phase) shows that pod without its write for
        # that moment, so the socket is read until the two waiting writes show.
        with anyio.fail_after(10):
            while True:
                document = await status_of(socket)
                waiting = {p["name"]: p["write"] for p in document["pods"] if p["write"]}
                if set(waiting) == {f"g{i}" for i in range(3)} - set(written):
                    break
                await anyio.sleep(0.05)
        for write in waiting.values():
            assert write["waits"] == "WriteBudget"
            assert write["changes"]["labels_set"] == {"idle": "yes"}
        status = await read_local_socket(StatusOptions(socket=socket), {})
        assert exit_code([status]) == 1
        assert "Pending writes:" in render_text([status])


async def daemon_pod(world: World, name: str, node: str) -> None:
    """A pod that plays the daemon's (the real one runs in this process)."""
    body: Any = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": DAEMONS,
            "labels": {"app.kubernetes.io/name": "probemarker"},
        },
        "spec": {"nodeName": node, "containers": [{"name": "probemarker", "image": "pm:1"}]},
    }
    await world.core.create_namespaced_pod(DAEMONS, body)


async def test_status_through_pods_exec_names_each_node(world: World, tmp_path: Path) -> None:
    async with on_node(world, tmp_path) as (_, daemon, _):
        await through_exec(world, daemon)


async def through_exec(world: World, daemon: Daemon) -> None:
    socket = daemon.settings.status_socket
    await world.core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=DAEMONS))
    )
    await daemon_pod(world, "probemarker-a", "node-1")
    await world.sim.kubelet.wait_running(DAEMONS, "probemarker-a")
    await daemon_pod(world, "probemarker-b", "node-2")  # no kubelet there: Pending
    asked: list[tuple[str, ...]] = []

    async def reader(request: ExecRequest) -> ExecReply:
        # `probemarker status --local ...` as the image runs it, against this daemon.
        asked.append(request.command)
        args = list(request.command[3:])
        pod = args[args.index("--pod") + 1] if "--pod" in args else None
        answer = await read_socket(socket, StatusOptions(pod=pod))
        return ExecReply(0, answer)

    world.sim.exec_handlers.register(DAEMONS, "probemarker-a", "probemarker", reader)
    settings = ConnectionSettings(kubeconfig=str(world.sim.kubeconfig_path))
    await world.wait_pod("nosidecar", lambda p: labels_of(p).get("idle") == "yes")
    with anyio.fail_after(30):
        nodes = await read_cluster(StatusOptions(pod=f"{NS}/nosidecar"), settings)
        assert asked == [("probemarker", "status", "--local", "--pod", f"{NS}/nosidecar")]
        assert [(n.node, n.daemon) for n in nodes] == [
            ("node-1", f"{DAEMONS}/probemarker-a"),
            ("node-2", f"{DAEMONS}/probemarker-b"),
        ]
        one, two = nodes
        assert one.problem is None
        assert [p["name"] for p in one.pods] == ["nosidecar"]
        assert two.problem is not None
        assert two.problem.startswith("the daemon is not running: pod phase Pending")
        assert exit_code(nodes) == 1
        text = render_text(nodes)
        assert f"node-2 ({DAEMONS}/probemarker-b): the daemon is not running" in text
        assert json.loads(render_json(nodes))["nodes"][1]["problem"] == two.problem
        # --node: only that node's daemon; a node without one is named.
        (only,) = await read_cluster(StatusOptions(node="node-1"), settings)
        assert only.problem is None
        (none,) = await read_cluster(StatusOptions(node="node-9"), settings)
        assert none.problem is not None
        assert "no daemon pod on node node-9" in none.problem
        # An exec the API server refuses names the permission it needs.
        world.sim.faults.exec.reject_status = 403
        (refused,) = await read_cluster(StatusOptions(node="node-1"), settings)
        assert refused.problem is not None
        assert "get and create on pods/exec in namespace probemarker-system" in refused.problem


async def test_status_reads_a_daemon_process_through_pods_exec(
    world: World, tmp_path: Path
) -> None:
    """The path tests/cluster/test_status.py takes, but for the kubelet: `probemarker
    run` as a process, its socket set as the DaemonSet sets it (PROBEMARKER_STATUS_SOCKET);
    the admin's `probemarker status --kubeconfig K --node N` execs into the daemon's
    pod, whose container (a host process of the sim, with the container's env) runs
    `probemarker status --local`, which reads that socket."""
    socket = str(tmp_path / "status.sock")
    shim = tmp_path / "bin" / "probemarker"  # the image's `probemarker` on the PATH
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m probemarker "$@"\n')
    shim.chmod(0o755)
    world.script.set("waits", "app", "check", ExecReply(1, b"", b"not yet\n"))
    for name in ("waits", "done"):
        await world.create_pod(name, labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle", failure=100)]))
    await world.core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=DAEMONS))
    )
    container_env = {
        "PROBEMARKER_STATUS_SOCKET": socket,
        "PATH": f"{shim.parent}:{DEFAULT_PATH}",
        "PYTHONPATH": ROOT,
    }
    body: Any = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "probemarker-x",
            "namespace": DAEMONS,
            "labels": {"app.kubernetes.io/name": "probemarker"},
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [{
                "name": "probemarker",
                "image": "pm:1",
                "env": [{"name": k, "value": v} for k, v in container_env.items()],
            }],
        },
    }  # fmt: skip
    await world.core.create_namespaced_pod(DAEMONS, body)
    await world.sim.kubelet.wait_running(DAEMONS, "probemarker-x")
    daemon_env = {"PROBEMARKER_STATUS_SOCKET": socket, "PYTHONPATH": ROOT}
    async with process.daemon(world.sim.kubeconfig_path, env=daemon_env) as proc:
        await proc.wait_event("daemon.ready")
        await world.wait_pod("done", lambda p: labels_of(p).get("idle") == "yes")
        await world.script.wait_calls(2)  # `waits` has failed at least once more
        with anyio.fail_after(60):
            done = await anyio.run_process(
                [sys.executable, "-m", "probemarker", "status", "--kubeconfig",
                 str(world.sim.kubeconfig_path), "--node", "node-1", "-o", "json"],
                check=False, env={**process.environment(), "PYTHONPATH": ROOT},
            )  # fmt: skip
        proc.signal(signal.SIGTERM)
        assert await proc.exit_code(within=15) == 0, proc.outline()
    assert done.returncode == 1, done.stderr  # `waits` is not decided
    ((node,),) = [json.loads(done.stdout)["nodes"]]
    assert (node["node"], node["daemon"], node["problem"]) == (
        "node-1",
        f"{DAEMONS}/probemarker-x",
        None,
    )
    found = rows(node)
    assert set(found) == {("waits", "m/idle"), ("done", "m/idle")}
    waits = found[("waits", "m/idle")]
    assert waits["state"] is None
    assert (waits["count"]["result"], waits["count"]["threshold"]) == ("Failed", 100)
    assert waits["last"]["message"] == "not yet"
    assert found[("done", "m/idle")]["state"] == "Succeeded"
    execs = world.sim.accounting.count(subresource="exec", namespace=DAEMONS)
    assert execs == 1  # one exec into the daemon's pod: the admin's
