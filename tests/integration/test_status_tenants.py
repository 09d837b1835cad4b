"""`probemarker status` on a node shared by tenants (issue 40), the real daemon on the
sim: what one namespace's markers render cannot grow the answer or hide another
namespace's pods, and `-n NS` is answered by the daemon from that namespace alone."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from kubernetes_asyncio import client

from probemarker.kit.text import SHOWN_LIMIT
from probemarker.observe.snapshot import PROBE_BYTES
from probemarker.observe.statussocket import StatusRequest
from probemarker.sim.exec.runners import ExecReply
from probemarker.sim.server.discovery.catalog import EVENTS
from probemarker.sim.store.watchcache import WatchEvent
from probemarker.status.read import StatusOptions, read_socket
from tests.integration.world import (
    GROUP,
    NS,
    PLURAL,
    VERSION,
    World,
    flag,
    marker,
    probe,
    running_daemon,
)

OTHER = "other"
AMPLIFIER = "{{.Result}}" * 372  # 4,092 bytes: a valid annotation template
ANSWER = b"r" * 1024  # what {{.Result}} stands for at most: 1 KiB
RENDERED = 372 * len(ANSWER)  # 380,928 bytes, each value
KEYS = 32  # annotations in one policy, the API's most


async def another_namespace(world: World) -> None:
    """Namespace `other`: pod web-0 on node-1 and a marker that labels it idle=yes."""
    await world.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=OTHER)))
    body: Any = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": OTHER, "labels": {"app": "web"}},
        "spec": {
            "nodeName": "node-1",
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "web:1"}],
        },
    }
    world.sim.exec_handlers.register(OTHER, "web-0", "app", world.script.answer)
    await world.core.create_namespaced_pod(OTHER, body)
    await world.sim.kubelet.wait_running(OTHER, "web-0")
    web = marker("web", probes=[flag("idle")], selector={"matchLabels": {"app": "web"}})
    web["metadata"]["namespace"] = OTHER
    await world.custom.create_namespaced_custom_object(GROUP, VERSION, OTHER, PLURAL, web)


async def amplifying_pods(world: World) -> None:
    """Two pods in `default` whose marker renders 32 annotations of 380 KB each (refused
    for room: a pod's annotations hold 256 KiB)."""
    for i in range(2):
        world.script.set(f"amp-{i}", "app", "amp", ExecReply(0, ANSWER + b"\n"))
        await world.create_pod(f"amp-{i}", labels={"app": "amp"})
    annotations = {f"amp.io/k{k:02}": AMPLIFIER for k in range(KEYS)}
    amp = probe("amp", command="amp", period=5, succeeded={"annotations": annotations})
    await world.apply_marker(marker("amp", probes=[amp], selector={"matchLabels": {"app": "amp"}}))


def peak_of(call: Callable[[], object]) -> int:
    """The most memory `call` held at once (bytes, tracemalloc); nothing else runs."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def warned(world: World, pods: set[str]) -> None:
    """Until each of `pods` has had an InvalidResultValue Warning: decided, rendered."""
    left = set(pods)
    with anyio.fail_after(10):
        watch = world.sim.store.watch(EVENTS, namespace=NS)
        try:
            async for event in watch:
                if isinstance(event, WatchEvent) and event.object.get("reason") == (
                    "InvalidResultValue"
                ):
                    left.discard(event.object["involvedObject"]["name"])
                    if not left:
                        return
        finally:
            watch.close()


async def test_a_template_cannot_grow_the_answer_or_hide_another_namespace(
    world: World, tmp_path: Path
) -> None:
    """Before issue 40 each value was in the answer whole, twice: 2 pods x 32 keys x
    380 KB x 2 = 48 MB, past the reader's 32 MiB, so the answer showed nobody."""
    await amplifying_pods(world)
    await another_namespace(world)
    socket = str(tmp_path / "status.sock")
    async with running_daemon(world.sim, status_socket=socket) as daemon:
        await warned(world, {"amp-0", "amp-1"})
        await world.sim.kubelet.wait_for_pod(
            OTHER, "web-0", lambda p: p["metadata"].get("labels", {}).get("idle") == "yes"
        )
        answer = await read_socket(socket, StatusOptions())
        document = json.loads(answer)
        pods = {(p["namespace"], p["name"]): p for p in document["pods"]}
        assert set(pods) == {(NS, "amp-0"), (NS, "amp-1"), (OTHER, "web-0")}
        (web,) = pods[(OTHER, "web-0")]["probes"]
        assert web["state"] == "Succeeded"
        assert document["omitted"] == []
        # The answer grows with pods x probes x keys, never with what a template renders.
        rows = sum(len(p["probes"]) for p in document["pods"])
        assert len(answer) <= rows * PROBE_BYTES
        assert len(answer) < 64 * 1024  # 3 rows, 64 values: what a reader of it prints
        for name in ("amp-0", "amp-1"):
            (row,) = pods[(NS, name)]["probes"]
            assert row["state"] == "Succeeded"
            values = row["last"]["values"]["annotations"]
            assert len(values) == KEYS
            digests = {v["sha256"] for v in values.values()}
            assert len(digests) == 1  # one value, told apart from others by its digest
            for value in values.values():
                assert value["bytes"] == RENDERED
                assert value["value"] == "r" * SHOWN_LIMIT
            refused = row["last"]["refused"]
            assert len(refused) == KEYS
            assert all(r["value"] is None for r in refused)  # held once: `values` shows it
        # Building it holds one pod's desired state at a time (the writer's plan of one
        # pod, which renders each value whole: write/desired.py) and the answer's bytes,
        # never every pod's values, nor a reader's answer of them whole.
        pod = next(e.view for e in daemon.engine._pods.values() if e.view.name == "amp-0")
        plan, status = (
            peak_of(lambda: daemon.engine.plan(pod)),
            peak_of(lambda: daemon.status(StatusRequest())),
        )
        assert status < plan + 1_000_000, (plan, status)
        # -n: the daemon answers from that namespace alone.
        only = json.loads(await read_socket(socket, StatusOptions(namespace=OTHER)))
        assert [(p["namespace"], p["name"]) for p in only["pods"]] == [(OTHER, "web-0")]
