"""The writer under a write budget shared by namespaces (issue 40): the namespaces with
a pod due take turns, why a pod waits is judged for that pod alone, a flush that sends
nothing spends no token, what is counted by namespace stays bounded, and the log line
of a write lists a bounded number of keys. A manual clock; a fake API that applies
each patch to the pod it names."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from typing import Any

import anyio
import orjson
import pytest
from structlog.testing import capture_logs

from probemarker.kube.write.ratelimit import TokenBucket
from probemarker.watch.pods import PodUID, PodView, pod_projection, pod_view
from probemarker.write.desired import DesiredPod, desired_state
from probemarker.write.flush import LOGGED_KEYS, logged_changes
from probemarker.write.pending import WriteWait
from probemarker.write.writer import PodWriter, WriterSettings
from tests.fakes import FakeClock, until
from tests.unit.write.helpers import S, apply, decided, owner, raw_pod, spec

WHO = "m#p"


class FakeApi:
    """The API server's side of status patches to many pods; a pod's request can be
    held (`hold`) until released, as a slow answer."""

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}  # by uid
        self.order: list[str] = []  # "namespace/name" of each patch, as applied
        self.held: dict[str, asyncio.Event] = {}

    def add(self, namespace: str, name: str) -> PodUID:
        pod = raw_pod()
        uid = f"uid-{namespace}-{name}"
        pod["metadata"].update(name=name, namespace=namespace, uid=uid, resourceVersion="1")
        self.pods[uid] = pod
        return PodUID(uid)

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        assert method == "PATCH", (method, path)
        _, namespace, _, name = path.removeprefix("/api/v1/").split("/")[:4]
        uid = next(
            u
            for u, p in self.pods.items()
            if (p["metadata"]["namespace"], p["metadata"]["name"]) == (namespace, name)
        )
        gate = self.held.get(uid)
        if gate is not None:
            await gate.wait()
        pod = apply(self.pods[uid], orjson.loads(kw["body"]))
        pod["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
        self.pods[uid] = pod
        self.order.append(f"{namespace}/{name}")
        return copy.deepcopy(pod)

    def lookup(self, uid: PodUID) -> tuple[PodView, str] | None:
        pod = self.pods.get(uid)
        if pod is None:
            return None
        return pod_view(pod_projection(pod)), pod["metadata"]["resourceVersion"]


class Rig:
    """A writer whose plan sets label `n` to each pod's answer (`answers`)."""

    def __init__(self, *, qps: float = 1.0, burst: int = 1) -> None:
        self.clock = FakeClock(1000.0)
        self.api = FakeApi()
        self.answers: dict[str, str] = {}
        self.more: dict[str, str] = {}  # labels every pod gets too
        self.limiter = TokenBucket(qps=qps, burst=burst, clock=self.clock)
        self.marks, receive = anyio.create_memory_object_stream[PodUID](100)
        self.writer = PodWriter(
            client=self.api,  # type: ignore[arg-type]  # only request() is used
            limiter=self.limiter,
            lookup=self.api.lookup,
            plan=self.plan,
            marks=receive,
            now_text=lambda: "2026-11-23T10:00:00Z",
            clock=self.clock,
            settings=WriterSettings(coalesce=0.0),
        )

    def plan(self, view: PodView) -> DesiredPod:
        labels = {"n": self.answers.get(view.uid, "0"), **self.more}
        probe = spec(ok=labels)
        return desired_state(pod=view, decided=[decided(WHO, S, probe)], live={owner(WHO): probe})

    def change(self, uid: PodUID, answer: str) -> None:
        self.answers[uid] = answer
        self.writer.mark(uid)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.marks, anyio.create_task_group() as group:
            group.start_soon(self.writer.run)
            yield
            group.cancel_scope.cancel()

    async def tick(self, writes: int) -> None:
        """One second on: the next token; until `writes` patches were applied in all."""
        self.clock.advance(1.0)
        await until(lambda: len(self.api.order) >= writes)


async def test_namespaces_with_pods_due_take_turns_at_the_budget() -> None:
    rig = Rig(qps=1.0, burst=1)
    flood = [rig.api.add("a", f"a{i}") for i in range(6)]
    quiet = rig.api.add("b", "b0")
    async with rig.running():
        for uid in flood:
            rig.change(uid, "1")
        await until(lambda: rig.api.order == ["a/a0"])  # the one token
        await until(lambda: rig.clock.sleeping == 1)  # the writer waits for the next
        rig.change(quiet, "1")  # b's pod is due now, behind five of a's
        for writes in range(2, 8):
            await rig.tick(writes)
    # a had its turn when b came, so one more of a's goes first, then b's; before
    # the fix b's write waited for all of a's: a0 ... a5, b0.
    assert rig.api.order == ["a/a0", "a/a1", "b/b0", "a/a2", "a/a3", "a/a4", "a/a5"]
    assert rig.writer.stats.sent_by_namespace == {"a": 6, "b": 1}


async def test_why_a_pod_waits_is_judged_for_that_pod_alone() -> None:
    rig = Rig(qps=1.0, burst=1)
    slow, waiting = rig.api.add("a", "slow"), rig.api.add("b", "waiting")
    rig.api.held[slow] = asyncio.Event()
    async with rig.running():
        rig.change(slow, "1")  # takes the token; its answer is slow
        await until(lambda: rig.writer.stats.sent_by_namespace == {"a": 1})
        rig.change(waiting, "1")  # due; waits for the next token
        await until(lambda: rig.writer.waiting_by_namespace() == {"b": 1})

        def waits(uid: PodUID) -> WriteWait | None:
            view = rig.api.lookup(uid)
            assert view is not None
            pending = rig.writer.pending(uid, view[0], rig.plan(view[0]))
            return None if pending is None else pending.waits

        # Before the fix the slow pod showed WriteBudget: another pod waited for a token.
        assert waits(slow) is WriteWait.SENDING
        assert waits(waiting) is WriteWait.WRITE_BUDGET
        rig.api.held[slow].set()
        await rig.tick(2)
        assert (waits(slow), waits(waiting)) == (None, None)


async def test_a_flush_that_sends_nothing_spends_no_token() -> None:
    rig = Rig(qps=1.0, burst=2)
    pod = rig.api.add("a", "a0")
    async with rig.running():
        rig.change(pod, "1")
        await until(lambda: rig.api.order == ["a/a0"])
        rig.writer.mark(pod)  # nothing changed: the flush finds the pod as planned
        await until(lambda: rig.writer.stats.unchanged == 1)
        assert rig.limiter.granted == 1
        assert rig.limiter.tokens == pytest.approx(1.0)


async def test_a_namespace_is_no_longer_counted_when_its_last_pod_is_gone() -> None:
    rig = Rig(qps=100.0, burst=100)
    kept, gone = rig.api.add("a", "a0"), rig.api.add("b", "b0")
    async with rig.running():
        rig.change(kept, "1")
        rig.change(gone, "1")
        await until(lambda: len(rig.api.order) == 2)
        assert rig.writer.stats.sent_by_namespace == {"a": 1, "b": 1}
        del rig.api.pods[gone]
        rig.writer.mark(gone)  # the engine's mark for a deleted pod
        await until(lambda: rig.writer.tracked == 1)
    assert rig.writer.stats.sent_by_namespace == {"a": 1}


@pytest.mark.parametrize(
    ("changes", "logged"),
    [
        pytest.param({}, {}, id="nothing"),
        pytest.param(
            {"labels_set": {"a": "1"}, "conditions": {"x.io/up": "True"}},
            {"labels_set": {"a": "1"}, "conditions": {"x.io/up": "True"}},
            id="few-as-they-are",
        ),
        pytest.param(
            {"labels_removed": [f"k{i}" for i in range(LOGGED_KEYS + 3)]},
            {"labels_removed": [f"k{i}" for i in range(LOGGED_KEYS)], "labels_removed_more": 3},
            id="a-list-cut",
        ),
        pytest.param(
            {"labels_set": {f"k{i:02}": "v" for i in range(LOGGED_KEYS + 1)}},
            {"labels_set": {f"k{i:02}": "v" for i in range(LOGGED_KEYS)}, "labels_set_more": 1},
            id="a-map-cut",
        ),
    ],
)
def test_logged_changes(changes: dict[str, Any], logged: dict[str, Any]) -> None:
    assert logged_changes(changes) == logged


async def test_a_write_of_many_keys_logs_a_bounded_line() -> None:
    rig = Rig(qps=100.0, burst=100)
    pod = rig.api.add("a", "a0")
    rig.more = {f"key-{i:03}": "v" for i in range(200)}
    with capture_logs() as logs:
        async with rig.running():
            rig.writer.mark(pod)
            await until(lambda: rig.api.order == ["a/a0"])
    [line] = [e for e in logs if e["event"] == "write.patched"]
    assert len(line["labels_set"]) == LOGGED_KEYS
    assert line["labels_set_more"] == 201 - LOGGED_KEYS
