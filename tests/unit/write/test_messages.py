"""The message-refresh rule (docs/engine.md) after a restart (issue 22): `message_due` as a
table, then the writer with a manual clock and a fake API that applies each patch,
its pod already showing a condition from the daemon's previous run."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator
from typing import Any

import anyio
import orjson
import pytest

from probemarker.api.model import ProbeState
from probemarker.kube.write.ratelimit import TokenBucket
from probemarker.watch.pods import PodUID, PodView, pod_projection, pod_view
from probemarker.write.desired import DesiredPod, desired_state
from probemarker.write.ownership import Owned
from probemarker.write.restrict import message_due
from probemarker.write.writer import PodWriter, WriterSettings
from tests.fakes import FakeClock, until
from tests.unit.write.helpers import UID, S, apply, condition, decided, owner, raw_pod, spec

REFRESH = 10.0
TYPE = "x.io/up"
WHO = "m#p"


@pytest.mark.parametrize(
    ("seen", "written", "refresh", "due"),
    [
        pytest.param(100.0, None, 10.0, 110.0, id="not-written-yet-counts-from-first-sight"),
        pytest.param(100.0, 130.0, 10.0, 140.0, id="counts-from-the-last-write"),
        pytest.param(100.0, 100.0, 10.0, 110.0, id="written-at-first-sight"),
        pytest.param(100.0, 90.0, 10.0, 110.0, id="a-write-before-first-sight-is-not-sooner"),
        pytest.param(100.0, None, 0.0, 100.0, id="no-refresh-any-time-after-first-sight"),
    ],
)
def test_message_due(seen: float, written: float | None, refresh: float, due: float) -> None:
    assert message_due(seen=seen, written=written, refresh=refresh) == due


class FakeApi:
    """The API server's side of a status patch: applies it to the one pod it holds."""

    def __init__(self, pod: dict[str, Any]) -> None:
        self.pod = {**pod, "metadata": {**pod["metadata"], "resourceVersion": "1"}}
        self.patches: list[list[dict[str, Any]]] = []

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        assert method == "PATCH", (method, path)
        ops = orjson.loads(kw["body"])
        self.patches.append(ops)
        version = int(self.pod["metadata"]["resourceVersion"]) + 1
        self.pod = apply(self.pod, ops)
        self.pod["metadata"]["resourceVersion"] = str(version)
        return copy.deepcopy(self.pod)

    def lookup(self, uid: PodUID) -> tuple[PodView, str]:
        return pod_view(pod_projection(self.pod)), self.pod["metadata"]["resourceVersion"]


class Rig:
    """A writer whose plan is one probe's decision (`state`, `message`)."""

    def __init__(self, pod: dict[str, Any], *, coalesce: float = 0.0) -> None:
        self.clock = FakeClock(1000.0)
        self.api = FakeApi(pod)
        self.state, self.message = S, "up 1"
        self.marks, receive = anyio.create_memory_object_stream[PodUID](100)
        self.writer = PodWriter(
            client=self.api,  # type: ignore[arg-type]  # only request() is used
            limiter=TokenBucket(qps=100.0, burst=100, clock=self.clock),
            lookup=self.api.lookup,
            plan=self.plan,
            marks=receive,
            now_text=lambda: "2026-11-23T10:00:00Z",
            clock=self.clock,
            settings=WriterSettings(coalesce=coalesce, message_refresh=REFRESH),
        )

    def plan(self, view: PodView) -> DesiredPod:
        probe = spec(ok={"up": "yes"}, bad={"up": "no"}, condition=TYPE)
        result = decided(WHO, self.state, probe, self.message)
        return desired_state(pod=view, decided=[result], live={owner(WHO): probe})

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.marks, anyio.create_task_group() as group:
            group.start_soon(self.writer.run)
            yield
            group.cancel_scope.cancel()

    def ended(self) -> int:
        """Flushes that ended (each with a write, or with none: nothing to send or held)."""
        return self.writer.stats.writes + self.writer.stats.unchanged

    async def decide(self, state: ProbeState, message: str) -> None:
        """The engine publishes a decision: the writer is marked, and flushes."""
        self.state, self.message = state, message
        ended = self.ended()
        self.writer.mark(PodUID(UID))
        await until(lambda: self.ended() > ended)

    async def advance(self, seconds: float, *, flushes: int = 0) -> None:
        """Move the clock on; `flushes`: how many flushes come due by then."""
        ended = self.ended()
        self.clock.advance(seconds)
        await until(lambda: self.ended() >= ended + flushes)

    def shown(self) -> tuple[str, str]:
        found = pod_view(pod_projection(self.api.pod)).condition(TYPE)
        assert found is not None
        return found["status"], found.get("message", "")


def previous_run(status: str = "True", message: str = "up 0") -> dict[str, Any]:
    """A pod as the daemon's previous run left it."""
    state = S if status == "True" else ProbeState.FAILED
    return raw_pod(
        labels={"up": "yes" if state is S else "no"},
        conditions=[condition(TYPE, status, reason=f"Probe{state}", message=message)],
        record={WHO: Owned(state, labels={"up": "yes" if state is S else "no"}, condition=TYPE)},
    )


async def test_after_a_restart_a_message_waits_for_the_interval_from_first_sight() -> None:
    rig = Rig(previous_run())
    async with rig.running():
        await rig.decide(S, "up 1")
        assert rig.api.patches == []  # before the fix: written at once
        assert rig.writer.stats.messages_held == 1
        await rig.advance(REFRESH - 0.5)
        await rig.decide(S, "up 2")
        assert rig.api.patches == []
        await rig.advance(0.5, flushes=1)  # the interval since first sight has passed
        assert len(rig.api.patches) == 1
        assert rig.shown() == ("True", "up 2")
        await rig.decide(S, "up 3")  # steady state: the interval counts from the write
        await rig.advance(REFRESH - 0.1)
        assert len(rig.api.patches) == 1
        await rig.advance(0.1, flushes=1)
        assert len(rig.api.patches) == 2
        assert rig.shown() == ("True", "up 3")


async def test_after_a_restart_a_state_change_goes_at_once_with_its_message() -> None:
    rig = Rig(previous_run())
    async with rig.running():
        await rig.decide(ProbeState.FAILED, "down 1")
        assert len(rig.api.patches) == 1
        assert rig.shown() == ("False", "down 1")
        assert rig.api.pod["metadata"]["labels"]["up"] == "no"


async def test_a_condition_the_previous_run_did_not_write_goes_at_once() -> None:
    """A pod first seen with no condition of ours: the condition is new (a state)."""
    rig = Rig(raw_pod(labels={"up": "yes"}))
    async with rig.running():
        await rig.decide(S, "up 1")
        assert len(rig.api.patches) == 1
        assert rig.shown() == ("True", "up 1")


async def test_a_stop_publishes_no_held_message() -> None:
    """The other half of a restart: the stopping daemon's last flush leaves a held
    message held (the next run publishes it after its interval)."""
    rig = Rig(previous_run())
    async with rig.running():
        await rig.decide(S, "up 1")
        assert rig.writer.stats.messages_held == 1
        with anyio.fail_after(1):
            await rig.writer.flush_pending()
        assert rig.api.patches == []  # before the fix: the held message went out here
        assert rig.shown() == ("True", "up 0")


async def test_a_stop_flushes_a_state_change_with_its_message() -> None:
    rig = Rig(previous_run(), coalesce=1.0)
    async with rig.running():
        rig.state, rig.message = ProbeState.FAILED, "down 1"
        rig.writer.mark(PodUID(UID))  # within the coalescing window at the stop
        with anyio.fail_after(1):
            await rig.writer.flush_pending()
        assert len(rig.api.patches) == 1
        assert rig.shown() == ("False", "down 1")
