"""The event recorder against the sim (HTTP, and HTTPS with a token): what it creates,
how repeats become a series, the window, the bounds, and failures that never raise.

Events are read back through the sim's API with a GET. Time is fake: a monotonic fake
clock for the window and a settable wall clock for the timestamps.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from probemarker.kit.text import trim_utf8
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import load_kubeconfig
from probemarker.kube.connect.errors import RequestInfo
from probemarker.kube.write.events import (
    EventRecorder,
    ObjectRef,
    RecorderSettings,
    event_name,
    micro_time,
)
from probemarker.kube.write.ratelimit import TokenBucket
from probemarker.sim import SimCluster
from tests.fakes import FakeClock, until
from tests.kube.conftest import TOKEN

POD = ObjectRef(kind="Pod", namespace="default", name="gs-1", uid="uid-1", resource_version="7")
EVENTS_V1 = "/apis/events.k8s.io/v1/namespaces/default/events"
START = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


@dataclass
class Wall:
    now: datetime = START

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Env:
    sim: SimCluster
    client: KubeClient
    clock: FakeClock = field(default_factory=FakeClock)
    wall: Wall = field(default_factory=Wall)
    limiter: TokenBucket = field(init=False)

    def __post_init__(self) -> None:
        self.limiter = TokenBucket(qps=100.0, burst=1000, clock=self.clock)

    def recorder(self, node: str = "node-1", **settings: Any) -> EventRecorder:
        return EventRecorder(
            self.client,
            node_name=node,
            limiter=self.limiter,
            clock=self.clock,
            wall=self.wall,
            settings=RecorderSettings(**settings),
        )

    async def events(self) -> list[dict[str, Any]]:
        info = RequestInfo("list", "events", namespace="default", group="events.k8s.io")
        listed = await self.client.request("GET", EVENTS_V1, info=info)
        ours = [
            e for e in listed["items"] if e.get("reportingController") == "probemarker.io/daemon"
        ]
        return sorted(ours, key=lambda e: str(e["metadata"]["name"]))

    def writes(self, verb: str) -> int:
        return self.sim.accounting.count(verb=verb, resource="events")


@pytest.fixture(params=["http", "https-token"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[Env]:
    options: dict[str, Any] = {"https": True, "token": TOKEN} if request.param != "http" else {}
    async with (
        SimCluster(node_names=("node-1",), kubelet_events=False, **options) as sim,
        KubeClient(await load_kubeconfig(sim.kubeconfig_path)) as client,
    ):
        yield Env(sim, client)


@contextlib.asynccontextmanager
async def sending(recorder: EventRecorder) -> AsyncIterator[EventRecorder]:
    """The recorder with its sender running (in a task group: a sender that fails
    fails the test at once instead of leaving `drain()` waiting)."""
    async with asyncio.TaskGroup() as group:
        sender = group.create_task(recorder.run())
        yield recorder
        await recorder.drain()
        sender.cancel()


def succeeded(recorder: EventRecorder, note: str = "idle") -> None:
    recorder.record(
        regarding=POD, type="Normal", reason="ProbeSucceeded", note=note, action="Probe"
    )


# -- what is created -----------------------------------------------------------------


async def test_an_event_is_created_with_the_fields_the_api_wants(env: Env) -> None:
    async with sending(env.recorder()) as running:
        succeeded(running, note="marker games/idle probe idle: ok")
        await running.drain()
        [event] = await env.events()
        assert re.fullmatch(r"gs-1\.[0-9a-f]+", event["metadata"]["name"])
        assert event["metadata"]["name"] == f"gs-1.{1772366400123456000:x}"
        assert {k: event[k] for k in ("reportingController", "reportingInstance", "type")} == {
            "reportingController": "probemarker.io/daemon",
            "reportingInstance": "node-1",
            "type": "Normal",
        }
        assert (event["reason"], event["action"]) == ("ProbeSucceeded", "Probe")
        assert event["note"] == "marker games/idle probe idle: ok"
        assert event["eventTime"] == "2026-03-01T12:00:00.123456Z"
        assert event["regarding"] == {
            "kind": "Pod",
            "namespace": "default",
            "name": "gs-1",
            "uid": "uid-1",
            "apiVersion": "v1",
            "resourceVersion": "7",
        }
        assert "series" not in event
        assert (running.stats.created, running.stats.failed) == (1, 0)
        assert env.limiter.granted == 1


async def test_the_event_shows_in_core_v1_as_kubectl_describe_reads_it(env: Env) -> None:
    async with sending(env.recorder()) as running:
        running.record(
            regarding=POD, type="Warning", reason="ProbeFailed", note="no", action="Probe"
        )
        await running.drain()
        info = RequestInfo("list", "events", namespace="default")
        listed = await env.client.request(
            "GET",
            "/api/v1/namespaces/default/events",
            info=info,
            params={"fieldSelector": "involvedObject.uid=uid-1"},
        )
        [event] = listed["items"]
        assert (event["type"], event["reason"], event["message"]) == (
            "Warning",
            "ProbeFailed",
            "no",
        )
        assert event["reportingComponent"] == "probemarker.io/daemon"


# -- repeats -------------------------------------------------------------------------


async def test_a_repeat_within_the_window_patches_the_series(env: Env) -> None:
    async with sending(env.recorder()) as running:
        succeeded(running)
        await running.drain()
        env.clock.advance(300.0)
        env.wall.now = START + timedelta(seconds=300)
        succeeded(running)
        await running.drain()
        [event] = await env.events()
        assert event["series"] == {"count": 2, "lastObservedTime": "2026-03-01T12:05:00.123456Z"}
        assert event["eventTime"] == "2026-03-01T12:00:00.123456Z"
        assert (env.writes("create"), env.writes("patch")) == (1, 1)
        env.clock.advance(300.0)  # the window counts from the last repeat
        succeeded(running)
        await running.drain()
        [event] = await env.events()
        assert event["series"]["count"] == 3
        assert (running.stats.created, running.stats.patched, running.stats.failed) == (1, 2, 0)


async def test_repeats_queued_before_the_write_become_one_create(env: Env) -> None:
    recorder = env.recorder()
    for _ in range(5):
        succeeded(recorder)
    async with sending(recorder):
        pass
    [event] = await env.events()
    assert event["series"]["count"] == 5
    assert (env.writes("create"), env.writes("patch")) == (1, 0)


async def test_a_repeat_after_the_window_is_a_new_event(env: Env) -> None:
    async with sending(env.recorder()) as running:
        succeeded(running)
        await running.drain()
        env.clock.advance(360.5)
        env.wall.now = START + timedelta(seconds=360.5)
        succeeded(running)
        await running.drain()
        first, second = await env.events()
        assert first["metadata"]["name"] != second["metadata"]["name"]
        assert "series" not in first
        assert "series" not in second
        assert (env.writes("create"), env.writes("patch")) == (2, 0)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"note": "other"}, id="note"),
        pytest.param({"reason": "ProbeFailed"}, id="reason"),
        pytest.param({"type": "Warning"}, id="type"),
        pytest.param({"action": "Other"}, id="action"),
        pytest.param({"regarding": ObjectRef("Pod", "default", "gs-2", "uid-2")}, id="object"),
    ],
)
async def test_a_different_event_is_a_new_one(env: Env, change: dict[str, Any]) -> None:
    async with sending(env.recorder()) as running:
        base: dict[str, Any] = {
            "regarding": POD,
            "type": "Normal",
            "reason": "ProbeSucceeded",
            "note": "idle",
            "action": "Probe",
        }
        running.record(**base)
        running.record(**(base | change))
        await running.drain()
        events = await env.events()
        assert len(events) == 2
        assert all("series" not in e for e in events)


async def test_an_event_deleted_meanwhile_is_created_again_with_its_series(env: Env) -> None:
    async with sending(env.recorder()) as running:
        succeeded(running)
        await running.drain()
        [event] = await env.events()
        name = event["metadata"]["name"]
        await env.client.request(
            "DELETE",
            f"{EVENTS_V1}/{name}",
            info=RequestInfo("delete", "events", namespace="default", group="events.k8s.io"),
        )
        succeeded(running)
        await running.drain()
        [event] = await env.events()
        assert (event["metadata"]["name"], event["series"]["count"]) == (name, 2)
        assert (running.stats.created, running.stats.failed) == (2, 0)


# -- what the API accepts ------------------------------------------------------------


async def test_long_notes_and_node_names_are_cut_to_the_apis_limits(env: Env) -> None:
    recorder = env.recorder(node="n" * 200)
    note = "é" * 600 + "tail"  # 1204 bytes
    recorder.record(regarding=POD, type="Warning", reason="ProbeFailed", note=note, action="Probe")
    async with sending(recorder):
        pass
    assert recorder.stats.failed == 0
    [event] = await env.events()
    assert event["note"] == "é" * 512
    assert event["reportingInstance"] == "n" * 128


async def test_a_cluster_scoped_object_gets_its_event_in_default(env: Env) -> None:
    async with sending(env.recorder()) as running:
        node = ObjectRef(kind="Node", namespace="", name="node-1", uid="uid-n")
        running.record(regarding=node, type="Normal", reason="Started", note="", action="Run")
        await running.drain()
        [event] = await env.events()
        assert event["regarding"]["kind"] == "Node"
        assert running.stats.failed == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param({"type": "Error"}, "Normal or Warning", id="type"),
        pytest.param({"reason": ""}, "reason", id="empty-reason"),
        pytest.param({"action": "a" * 129}, "action", id="long-action"),
    ],
)
async def test_bad_arguments_are_refused_at_once(
    env: Env, args: dict[str, Any], message: str
) -> None:
    recorder = env.recorder()
    base: dict[str, Any] = {
        "regarding": POD,
        "type": "Normal",
        "reason": "R",
        "note": "",
        "action": "A",
    }
    with pytest.raises(ValueError, match=message):
        recorder.record(**(base | args))
    assert recorder.stats.recorded == 0


# -- failures and bounds -------------------------------------------------------------


async def test_a_failed_write_is_counted_not_raised_and_the_next_repeat_writes(env: Env) -> None:
    async with sending(env.recorder()) as running:
        rule = env.sim.faults.fail_requests(code=500, verb="create", resource="events")
        succeeded(running)
        await running.drain()
        assert (running.stats.failed, await env.events()) == (1, [])
        env.sim.faults.remove(rule)
        succeeded(running)
        await running.drain()
        [event] = await env.events()
        assert event["series"]["count"] == 2


async def test_an_already_existing_event_is_taken_as_created(env: Env) -> None:
    async with sending(env.recorder()) as running:
        env.sim.faults.fail_requests(code=409, verb="create", resource="events", times=1)
        succeeded(running)
        await running.drain()
        assert (running.stats.created, running.stats.failed) == (0, 0)
        succeeded(running)  # the patch finds nothing (the 409 was injected): created again
        await running.drain()
        [event] = await env.events()
        assert event["series"]["count"] == 2


async def test_a_full_queue_drops_and_counts_but_repeats_take_no_room(env: Env) -> None:
    recorder = env.recorder(max_queued=2)
    for note in ("a", "b", "c"):
        succeeded(recorder, note=note)
    succeeded(recorder, note="a")  # a repeat of a queued series
    assert (recorder.stats.recorded, recorder.stats.dropped) == (4, 1)
    assert recorder.stats.queued_max == 2  # the peak, for the metrics
    async with sending(recorder):
        pass
    assert [(e["note"], e.get("series", {}).get("count")) for e in await env.events()] == [
        ("a", 2),
        ("b", None),
    ]


async def test_the_cache_is_bounded(env: Env) -> None:
    recorder = env.recorder(max_cached=2)
    for note in ("a", "b", "c", "a"):
        succeeded(recorder, note=note)
    assert recorder.stats.evicted == 2  # "a", then "b" made room
    async with sending(recorder):
        pass
    assert len(await env.events()) == 4  # "a" again was a new event


async def test_writes_wait_for_the_shared_bucket_and_cancel_cleanly(env: Env) -> None:
    limiter = TokenBucket(qps=1.0, burst=1, clock=env.clock)
    recorder = EventRecorder(
        env.client, node_name="node-1", limiter=limiter, clock=env.clock, wall=env.wall
    )
    await limiter.acquire()  # a status patch took the only token
    succeeded(recorder)
    sender = asyncio.create_task(recorder.run())
    await until(lambda: env.clock.sleeping == 1)
    assert env.writes("create") == 0
    sender.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sender
    assert limiter.waiting == 0


# -- the pure parts ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        pytest.param("abc", 3, "abc", id="fits"),
        pytest.param("abcd", 3, "abc", id="ascii-cut"),
        pytest.param("aé", 2, "a", id="never-half-a-character"),
        pytest.param("aé", 3, "aé", id="two-byte-fits"),
        pytest.param("€€", 5, "€", id="three-byte"),
        pytest.param("", 0, "", id="empty"),
    ],
)
def test_trim_utf8(text: str, limit: int, expected: str) -> None:
    assert trim_utf8(text, limit) == expected


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        pytest.param("gs-1", True, id="pod-name"),
        pytest.param("a.b-c", True, id="subdomain"),
        pytest.param("x" * 236, True, id="just-fits"),
        pytest.param("x" * 237, False, id="too-long"),
        pytest.param("Upper", False, id="not-a-subdomain"),
    ],
)
def test_event_name(name: str, valid: bool) -> None:
    generated = event_name(name, 0x17A2B3C4D5E6F708)
    if valid:
        assert generated == f"{name}.17a2b3c4d5e6f708"
    else:
        assert re.fullmatch(
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", generated
        )


def test_micro_time_is_utc_with_microseconds() -> None:
    east = datetime(2026, 3, 1, 14, 0, 0, 5, tzinfo=UTC).astimezone()
    assert micro_time(east) == "2026-03-01T14:00:00.000005Z"


async def test_a_new_resource_version_of_the_object_is_the_same_series(env: Env) -> None:
    async with sending(env.recorder()) as running:
        succeeded(running)
        later = ObjectRef("Pod", "default", "gs-1", "uid-1", resource_version="8")
        running.record(
            regarding=later, type="Normal", reason="ProbeSucceeded", note="idle", action="Probe"
        )
        await running.drain()
        [event] = await env.events()
        assert event["series"]["count"] == 2
        assert event["regarding"]["resourceVersion"] == "7"  # the first one's, immutable
