"""Edge cases end to end: conflicts, bare pods, hanging and hostile probes, restarts,
pods deleted mid-probe."""

from __future__ import annotations

import asyncio

import anyio

from probemarker.sim.exec.runners import ExecReply, ExecRequest
from tests.integration.world import (
    NS,
    World,
    annotations_of,
    condition,
    labels_of,
    marker,
    probe,
    running_daemon,
)


async def test_two_markers_setting_one_key_differently(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    world.script.set("g", "app", "b", ExecReply(1, b"no\n"))
    await world.apply_marker(
        marker("a", probes=[probe("p", command="a", succeeded={"labels": {"role": "a"}})])
    )
    await world.apply_marker(
        marker("b", probes=[probe("p", command="a", succeeded={"labels": {"role": "b"}})])
    )
    async with running_daemon(world.sim):
        # Whichever decides first writes first; marker a sorts first, so it ends up winning.
        await world.wait_pod("g", lambda p: labels_of(p).get("role") == "a")
        await asyncio.sleep(0.5)
        assert labels_of(world.pod("g"))["role"] == "a"
        await world.sim.accounting.wait_for(at_least=3, resource="events", within=5)
        event = world.events("ConflictingMarkers")[0]
        note = event.get("note") or event.get("message") or ""
        assert "a#p" in note
        assert "b#p" in note


async def test_a_pod_with_no_labels_or_annotations_at_all(world: World) -> None:
    await world.create_pod("bare")
    selector = {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}
    await world.apply_marker(
        marker(
            "m",
            selector=selector,
            probes=[
                probe(
                    "p",
                    succeeded={"labels": {"seen": "yes"}, "annotations": {"x.io/seen": "yes"}},
                )
            ],
        )
    )
    async with running_daemon(world.sim):
        pod = await world.wait_pod("bare", lambda p: "seen" in labels_of(p))
    assert annotations_of(pod)["x.io/seen"] == "yes"


async def test_a_probe_hanging_past_its_timeout_is_failed(world: World) -> None:
    async def hang(request: ExecRequest) -> ExecReply:
        await asyncio.sleep(30)
        return ExecReply(0)

    await world.create_pod("g", labels={"app": "game"})
    world.sim.exec_handlers.register(NS, "g", "app", hang)
    await world.apply_marker(
        marker("m", probes=[probe("p", condition="x.io/p", timeout=1, period=2)])
    )
    async with running_daemon(world.sim):
        pod = await world.wait_pod("g", lambda p: condition(p, "x.io/p") is not None)
    cond = condition(pod, "x.io/p") or {}
    assert cond["status"] == "False"
    assert "timed out" in cond["message"]


async def test_hostile_output_is_trimmed_and_sanitised(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    noise = b"\x1b[31mred\x1b[0m \x00\xff\xfe" + b"x" * (10 * 1024 * 1024)
    world.script.set("g", "app", "check", ExecReply(0, noise))
    await world.apply_marker(marker("m", probes=[probe("p", condition="x.io/p")]))
    async with running_daemon(world.sim):
        pod = await world.wait_pod("g", lambda p: condition(p, "x.io/p") is not None, within=20)
    message = (condition(pod, "x.io/p") or {})["message"]
    assert len(message.encode()) <= 1024
    assert "\x1b" not in message
    assert "\x00" not in message


async def test_container_restart_resets_thresholds(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(
        marker(
            "m",
            probes=[probe("p", condition="x.io/p", failure=2, succeeded={"labels": {"ok": "1"}})],
        )
    )
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: "ok" in labels_of(p))
        world.sim.kubelet.restart_container(NS, "g", "app")
        world.script.set("g", "app", "check", ExecReply(1, b"", b"warming up\n"))
        pod = await world.wait_pod(
            "g", lambda p: (condition(p, "x.io/p") or {}).get("status") == "False"
        )
    assert "ok" not in labels_of(pod)


async def test_a_pod_deleted_mid_probe_writes_nothing(world: World) -> None:
    started = anyio.Event()

    async def slow(request: ExecRequest) -> ExecReply:
        started.set()
        await asyncio.sleep(0.5)
        return ExecReply(1, b"late\n")

    await world.create_pod("g", labels={"app": "game"})
    world.sim.exec_handlers.register(NS, "g", "app", slow)
    await world.apply_marker(marker("m", probes=[probe("p", condition="x.io/p", timeout=2)]))
    async with running_daemon(world.sim) as daemon:
        with anyio.fail_after(5):
            await started.wait()
        writes = world.pod_writes()
        await world.core.delete_namespaced_pod("g", NS, grace_period_seconds=0)
        await world.sim.kubelet.wait_removed(NS, "g")
        await asyncio.sleep(1.0)
        assert world.pod_writes() == writes
        assert daemon.engine.probe_count == 0
        assert daemon.writer.stats.failures == {}
        assert daemon.writer.tracked == 0
