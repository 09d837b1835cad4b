"""The event budget shared by namespaces (issue 40): the namespaces take turns at the
events' bucket, a namespace that floods the queue drops its own events and never
another's, drops are counted by namespace, and the lines they cause are bounded.
Against the sim (HTTP); a fake clock."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import load_kubeconfig
from probemarker.kube.write.events import EventRecorder, ObjectRef, RecorderSettings
from probemarker.kube.write.ratelimit import TokenBucket
from probemarker.sim import SimCluster
from probemarker.sim.store.resourcetype import NAMESPACES
from tests.fakes import FakeClock


@dataclass
class Env:
    sim: SimCluster
    client: KubeClient
    clock: FakeClock = field(default_factory=FakeClock)

    def recorder(self, limiter: TokenBucket | None = None, **settings: Any) -> EventRecorder:
        return EventRecorder(
            self.client,
            node_name="node-1",
            limiter=limiter or TokenBucket(qps=100.0, burst=1000, clock=self.clock),
            clock=self.clock,
            settings=RecorderSettings(**settings),
        )

    def created(self) -> list[str]:
        """The namespaces of the events created, in the order the server took them."""
        return [
            r.namespace
            for r in self.sim.accounting.records
            if (r.verb, r.resource, r.code) == ("create", "events", 201)
        ]


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with (
        SimCluster(node_names=("node-1",), kubelet_events=False) as sim,
        KubeClient(await load_kubeconfig(sim.kubeconfig_path)) as client,
    ):
        for name in ("a", "b", "c"):
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            sim.store.create(NAMESPACES, body, namespace=None)
        yield Env(sim, client)


@contextlib.asynccontextmanager
async def sending(recorder: EventRecorder) -> AsyncIterator[EventRecorder]:
    async with asyncio.TaskGroup() as group:
        sender = group.create_task(recorder.run())
        yield recorder
        await recorder.drain()
        sender.cancel()


async def settled(condition: Callable[[], bool]) -> None:
    """Until `condition` holds: requests go over a real socket, so event-loop turns
    alone are not enough (no assertion on how long it takes)."""
    with anyio.fail_after(10):
        while not condition():  # noqa: ASYNC110 (the sender's state: no event to await)
            await anyio.sleep(0.005)


def transition(recorder: EventRecorder, namespace: str, note: str) -> None:
    pod = ObjectRef(kind="Pod", namespace=namespace, name="gs-1", uid=f"uid-{namespace}")
    recorder.record(
        regarding=pod, type="Normal", reason="ProbeSucceeded", note=note, action="Probe"
    )


async def test_namespaces_take_turns_at_the_events_budget(env: Env) -> None:
    recorder = env.recorder()
    for i in range(4):
        transition(recorder, "a", f"a{i}")
    transition(recorder, "b", "b0")
    transition(recorder, "c", "c0")
    assert recorder.queued_by_namespace() == {"a": 4, "b": 1, "c": 1}
    async with sending(recorder):
        pass
    # Before the fix, b's and c's events waited behind all of a's: a a a a b c.
    assert env.created() == ["a", "b", "c", "a", "a", "a"]
    assert recorder.stats.sent_by_namespace == {"a": 4, "b": 1, "c": 1}


async def test_the_turn_goes_to_whoever_waits_when_a_token_comes(env: Env) -> None:
    limiter = TokenBucket(qps=1.0, burst=1, clock=env.clock)
    recorder = env.recorder(limiter)
    for i in range(3):
        transition(recorder, "a", f"a{i}")
    async with sending(recorder):
        await settled(lambda: env.created() == ["a"] and env.clock.sleeping == 1)
        transition(recorder, "b", "b0")  # b comes while the sender waits for a token
        for written in (2, 3, 4):
            env.clock.advance(1.0)
            await settled(
                lambda n=written: (
                    len(env.created()) == n and (env.clock.sleeping == 1 or recorder.queued == 0)
                )
            )
    # a had its turn (a0) and is next; b joins the turn behind it: one of a's, then b.
    # Before the fix: a a a b.
    assert env.created() == ["a", "a", "b", "a"]


async def test_a_flooding_namespace_drops_its_own_events_never_anothers(env: Env) -> None:
    recorder = env.recorder(max_queued_per_namespace=3, max_queued=4)
    for i in range(10):
        transition(recorder, "a", f"a{i}")  # a: 3 queued, 7 dropped
    transition(recorder, "b", "b0")  # fits: 4 queued in all
    transition(recorder, "c", "c0")  # full: a, holding the most, gives way
    assert recorder.queued_by_namespace() == {"a": 2, "b": 1, "c": 1}
    stats = recorder.stats
    assert (stats.dropped, stats.dropped_by_namespace) == (8, {"a": 8})
    async with sending(recorder):
        pass
    assert sorted(env.created()) == ["a", "a", "b", "c"]
    # A dropped (or pushed out) series is written with its next repeat.
    transition(recorder, "a", "a2")
    async with sending(recorder):
        pass
    assert env.created().count("a") == 3


async def test_drops_are_logged_once_a_minute_per_namespace(env: Env) -> None:
    recorder = env.recorder(max_queued_per_namespace=1)
    with capture_logs() as logs:
        for i in range(1000):
            transition(recorder, "a", f"a{i}")
        transition(recorder, "b", "b0")
        transition(recorder, "b", "b1")
        env.clock.advance(60.0)
        transition(recorder, "a", "again")
    dropped = [(e["namespace"], e.get("held_back")) for e in logs if e["event"] == "event.dropped"]
    # Before the fix: one line each time dropping started again, for all namespaces at
    # once; a namespace's flood could hide another's drops.
    assert dropped == [("a", None), ("b", None), ("a", 998)]
    assert recorder.stats.dropped_by_namespace == {"a": 1000, "b": 1}


async def test_failed_writes_are_logged_once_a_minute_per_namespace(env: Env) -> None:
    recorder = env.recorder()
    env.sim.faults.fail_requests(code=500, verb="create", resource="events")
    with capture_logs() as logs:
        for i in range(10):
            transition(recorder, "a", f"a{i}")
        transition(recorder, "b", "b0")
        async with sending(recorder):
            pass
    failed = [e["name"].split("/")[0] for e in logs if e["event"] == "event.write_failed"]
    assert recorder.stats.failed == 11
    # Before the fix: a line per failed write (11).
    assert failed == ["a", "b"]


async def test_one_namespace_alone_has_every_place_and_gives_one_back(env: Env) -> None:
    recorder = env.recorder()  # the defaults: 1000 places, no cap per namespace
    for i in range(1000):
        transition(recorder, "a", f"a{i}")  # a burst: 1000 pods flipping at once
    assert (recorder.queued, recorder.stats.dropped) == (1000, 0)
    transition(recorder, "b", "b0")
    assert recorder.queued_by_namespace() == {"a": 999, "b": 1}
    assert recorder.stats.dropped_by_namespace == {"a": 1}
