"""Each of Kruise's weaknesses (docs/design.md), with a test that shows we do not have it."""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from probemarker.sim.exec.runners import ExecReply, ExecRequest
from tests.integration.world import (
    OWNED,
    Script,
    World,
    annotations_of,
    condition,
    eventually,
    flag,
    labels_of,
    marker,
    probe,
    running_daemon,
)
from tests.rbac_check import disallowed


async def test_two_probes_on_one_container_do_not_overwrite_each_other(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    world.script.set("g", "app", "role", ExecReply(1, b"secondary\n"))
    await world.apply_marker(
        marker(
            "m",
            probes=[
                probe("idle", command="idle", condition="game.io/idle"),
                probe("role", command="role", condition="game.io/primary"),
            ],
        )
    )
    async with running_daemon(world.sim):
        pod = await world.wait_pod(
            "g",
            lambda p: (
                condition(p, "game.io/idle") is not None
                and condition(p, "game.io/primary") is not None
            ),
        )
    assert (condition(pod, "game.io/idle") or {})["status"] == "True"
    assert (condition(pod, "game.io/primary") or {})["status"] == "False"
    assert (condition(pod, "game.io/primary") or {})["message"] == "secondary"


async def test_a_restarted_daemon_writes_nothing_and_flaps_nothing(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(
        marker("m", probes=[flag("idle", condition="game.io/idle", success=2, failure=2)])
    )
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: labels_of(p).get("idle") == "yes")
    writes, before = world.pod_writes(), world.pod("g")
    async with running_daemon(world.sim):
        await world.script.wait_calls(4)  # two thresholds' worth of runs
        await anyio.sleep(0.2)  # past the writer's coalescing window
    assert world.pod_writes() == writes
    after = world.pod("g")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


@dataclass
class Uptime(Script):
    """Every answer is new, as from a command that prints an uptime or a timestamp:
    `up N` on stdout, or `down N` on stderr with exit 1 for the pods in `failing`."""

    failing: set[str] = field(default_factory=set)

    async def answer(self, request: ExecRequest) -> ExecReply:
        await super().answer(request)
        n = len(self.calls)
        if request.target.pod in self.failing:
            return ExecReply(1, b"", b"down %d\n" % n)
        return ExecReply(0, b"up %d\n" % n)


async def test_a_restart_writes_only_where_a_state_differs(world: World) -> None:
    """Issue 22: after a restart every pod's probe answers with another message than
    the one its condition shows. Only the pod whose *state* changed meanwhile
    (`flip`) is written at once; the message-only differences wait for the message
    refresh interval, counted from the daemon's start (one write per pod per run
    before the fix: 62 writes in 8 s on a busy node), and the stop publishes none of
    the messages held."""
    world.script = script = Uptime(failing={"down"})
    names = ["flip", "up0", "up1", "down"]
    for name in names:
        await world.create_pod(name, labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("up", condition="game.io/up")]))
    async with running_daemon(world.sim):
        for name in names:
            await world.wait_pod(name, lambda p: "up" in labels_of(p))

    def writes() -> dict[str, int]:
        count = world.sim.accounting.count
        return {
            n: count(verb="patch", resource="pods", subresource="status", name=n) for n in names
        }

    script.failing.add("flip")
    before = writes()
    async with running_daemon(world.sim, message_refresh_seconds=3600.0):
        flipped = await world.wait_pod("flip", lambda p: labels_of(p).get("up") == "no")
        await script.wait_calls(3 * len(names))  # each run a new message on every pod
        await anyio.sleep(0.2)  # past the writer's coalescing window
        assert {n: writes()[n] - before[n] for n in names} == {
            "flip": 1,
            "up0": 0,
            "up1": 0,
            "down": 0,
        }
        inside = writes()
    assert writes() == inside  # nor does its stop publish the messages it held
    assert (condition(flipped, "game.io/up") or {}).get("message", "").startswith("down ")

    # With a short interval the messages catch up, but never sooner than the interval
    # after the daemon's start (`started` is before it, so this bound is the weaker).
    refresh, quiet = 2.0, ["up0", "up1", "down"]
    before = writes()

    def written(n: str) -> bool:
        return writes()[n] > before[n]

    started = anyio.current_time()
    async with running_daemon(world.sim, message_refresh_seconds=refresh):
        await eventually(lambda: any(written(n) for n in quiet))
        first = anyio.current_time()
        await eventually(lambda: all(written(n) for n in quiet))
    assert first - started >= refresh, (first, started)
    for name in quiet:
        message = (condition(world.pod(name), "game.io/up") or {}).get("message", "")
        assert message.split()[0] == ("down" if name == "down" else "up")


async def test_a_period_change_applies_from_the_next_run(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle", period=1)]))
    async with running_daemon(world.sim):
        await world.script.wait_calls(2)
        await world.apply_marker(marker("m", probes=[flag("idle", period=3600)]))
        await anyio.sleep(0.1)
        seen = len(world.script.calls)
        await anyio.sleep(2.5)
        # At most the run already booked on the old grid; then once an hour.
        assert len(world.script.calls) - seen <= 1
        await world.apply_marker(marker("m", probes=[flag("idle", period=1)]))
        await world.script.wait_calls(2, within=5)


async def test_a_command_change_applies_from_the_next_run(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    world.script.set("g", "app", "busy", ExecReply(1, b"busy\n"))
    await world.apply_marker(marker("m", probes=[flag("idle", command="idle")]))
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: labels_of(p).get("idle") == "yes")
        await world.apply_marker(marker("m", probes=[flag("idle", command="busy")]))
        await world.wait_pod("g", lambda p: labels_of(p).get("idle") == "no")


async def test_deleting_marker_way_leaves_gateway_alone(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(marker("way", probes=[flag("w", condition="x.io/way")]))
    await world.apply_marker(marker("gateway", probes=[flag("gw", condition="x.io/gateway")]))
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: {"w", "gw"} <= set(labels_of(p)))
        await world.delete_marker("way")
        pod = await world.wait_pod("g", lambda p: "w" not in labels_of(p))
        assert labels_of(pod)["gw"] == "yes"
        assert condition(pod, "x.io/gateway") is not None
        assert condition(pod, "x.io/way") is None
        await world.script.wait_calls(2)
        assert labels_of(world.pod("g"))["gw"] == "yes"


async def test_a_pod_relabelled_out_of_the_selector_is_cleaned_up(world: World) -> None:
    await world.create_pod("g", labels={"app": "game", "team": "a"})
    await world.apply_marker(marker("m", probes=[flag("idle", condition="game.io/idle")]))
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: "idle" in labels_of(p))
        await world.label("g", {"app": "other"})
        pod = await world.wait_pod(
            "g", lambda p: "idle" not in labels_of(p) and OWNED not in annotations_of(p)
        )
        assert condition(pod, "game.io/idle") is None
        assert labels_of(pod) == {"app": "other", "team": "a"}
        calls = len(world.script.calls)
        await anyio.sleep(1.5)
        assert len(world.script.calls) == calls  # no longer probed


async def test_a_marker_deleted_while_the_daemon_was_down_is_cleaned_up(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle", condition="game.io/idle")]))
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: "idle" in labels_of(p))
    await world.delete_marker("m")
    async with running_daemon(world.sim):
        pod = await world.wait_pod(
            "g", lambda p: "idle" not in labels_of(p) and condition(p, "game.io/idle") is None
        )
    assert OWNED not in annotations_of(pod)


async def test_unknown_is_never_written(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle", condition="game.io/idle")]))
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: labels_of(p).get("idle") == "yes")
        writes = world.pod_writes()
        rule = world.sim.faults.fail_requests(code=500, resource="pods", subresource="exec")
        world.script.set("g", "app", "check", ExecReply(1, b"", b"would fail\n"))
        await world.sim.accounting.wait_for(at_least=3, code=500, subresource="exec", within=10)
        assert world.pod_writes() == writes
        assert labels_of(world.pod("g"))["idle"] == "yes"
        world.sim.faults.remove(rule)
        await world.wait_pod("g", lambda p: labels_of(p).get("idle") == "no")


async def test_every_request_is_allowed_by_the_projects_role(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle", condition="game.io/idle")]))
    world.sim.accounting.reset()
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: "idle" in labels_of(p))
        await world.delete_marker("m")
        await world.wait_pod("g", lambda p: "idle" not in labels_of(p))
    daemon = [
        r
        for r in world.sim.accounting.records
        if r.resource != "podprobemarkers" or r.verb != "delete"
    ]
    assert len(daemon) == len(world.sim.accounting.records) - 1  # only the test's own delete
    assert disallowed(daemon) == []
