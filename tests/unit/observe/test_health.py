"""observe/health.py and the informer's deadlines: what /healthz and /readyz decide.

Liveness fails only for what a restart fixes: a late event loop, an informer loop hung
past a deadline of its own. An informer that fails and retries (an API server down, a
CRD missing) is never hung; it shows on readiness, with its reason.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import pytest

from probemarker.kube.connect.errors import ApiUnreachable, RequestInfo
from probemarker.kube.watch.informer import PODS, Informer, InformerSettings
from probemarker.observe.health import (
    HealthSettings,
    Heartbeat,
    InformerState,
    liveness,
    readiness,
)
from tests.fakes import FakeClock, until

SETTINGS = HealthSettings(heartbeat=1.0, loop_late_max=5.0, stuck_after=60.0)


@pytest.mark.parametrize(
    ("late", "overdue", "ok", "lines"),
    [
        pytest.param(0.01, {"pods": -300.0}, True, ["ok: event loop late 0.010s"], id="healthy"),
        pytest.param(5.0, {}, True, ["ok: event loop late 5.000s"], id="late-at-the-bound"),
        pytest.param(
            5.5,
            {},
            False,
            ["event loop: 5.5s late waking a timer (bound 5s): something blocks it"],
            id="loop-late",
        ),
        pytest.param(0.0, {"pods": 60.0}, True, None, id="overdue-within-the-margin"),
        pytest.param(
            0.0,
            {"pods": 61.0, "podprobemarkers": -math.inf},
            False,
            ["informer pods: hung 61s past its own deadline (bound 60s)"],
            id="informer-hung",
        ),
        pytest.param(
            9.0,
            {"podprobemarkers": 100.0, "pods": 70.0},
            False,
            [
                "event loop: 9.0s late waking a timer (bound 5s): something blocks it",
                "informer podprobemarkers: hung 100s past its own deadline (bound 60s)",
                "informer pods: hung 70s past its own deadline (bound 60s)",
            ],
            id="all-of-them",
        ),
    ],
)
def test_liveness(
    late: float, overdue: dict[str, float], ok: bool, lines: list[str] | None
) -> None:
    report = liveness(loop_late=late, overdue=overdue, settings=SETTINGS)
    assert report.ok is ok
    if lines is not None:
        assert list(report.lines) == lines
    assert report.text.endswith("\n")


POD_OK = InformerState("pods", True, None)
MARKERS_MISSING = InformerState(
    "podprobemarkers", False, "the API server does not serve podprobemarkers"
)


@pytest.mark.parametrize(
    ("ready", "stopping", "informers", "ok", "lines"),
    [
        pytest.param(True, False, [POD_OK], True, ["ok"], id="ready"),
        # A stopping daemon stays ready: the kubelet's failed readiness probes of a
        # pod being deleted are Warnings, and nothing needs the 503 (observe/health.py).
        pytest.param(True, True, [POD_OK], True, ["ok: stopping"], id="stopping-stays-ready"),
        pytest.param(
            False,
            True,
            [POD_OK, MARKERS_MISSING],
            False,
            [
                "informer podprobemarkers: waiting for its first list: the API server does "
                "not serve podprobemarkers"
            ],
            id="stopping-before-ready-stays-not-ready",
        ),
        pytest.param(
            False,
            False,
            [InformerState("pods", False, None), MARKERS_MISSING],
            False,
            [
                "informer pods: waiting for its first list",
                "informer podprobemarkers: waiting for its first list: the API server does "
                "not serve podprobemarkers",
            ],
            id="waiting-with-reasons",
        ),
        pytest.param(
            False,
            False,
            [POD_OK, InformerState("podprobemarkers", True, None)],
            False,
            ["starting the engine"],
            id="synced-engine-not-started",
        ),
    ],
)
def test_readiness(
    ready: bool, stopping: bool, informers: list[InformerState], ok: bool, lines: list[str]
) -> None:
    report = readiness(ready=ready, stopping=stopping, informers=informers)
    assert (report.ok, list(report.lines)) == (ok, lines)


SOCKET = "unix:///run/containerd/containerd.sock"
REFUSED = "UNAVAILABLE: failed to connect to all addresses"


@pytest.mark.parametrize(
    ("runtime", "ok"),
    [
        pytest.param(None, True, id="api-backend"),
        pytest.param((SOCKET, 0.0, ""), True, id="answering"),
        pytest.param((SOCKET, 60.0, REFUSED), True, id="refused-at-the-bound"),
        pytest.param((SOCKET, 61.0, REFUSED), False, id="refused-past-the-bound"),
    ],
)
def test_liveness_fails_on_a_runtime_socket_that_refuses_too_long(
    runtime: tuple[str, float, str] | None, ok: bool
) -> None:
    report = liveness(loop_late=0.0, overdue={}, settings=SETTINGS, runtime=runtime)
    assert report.ok is ok
    if not ok:
        assert report.lines == (
            f"container runtime at {SOCKET}: every call refused for 61s (bound 60s; {REFUSED}): "
            "a runtime that re-created its socket is reached again through a new mount, "
            "after a restart",
        )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"heartbeat": 0.0},
        {"loop_late_max": 0.0},
        {"stuck_after": -1.0},
        {"runtime_refused_max": -1.0},
    ],
)
def test_health_settings_are_checked(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="health needs"):
        HealthSettings(**kwargs)


async def test_heartbeat_measures_how_late_the_loop_wakes_it() -> None:
    clock = FakeClock()
    heartbeat = Heartbeat(clock=clock, interval=1.0)
    async with anyio.create_task_group() as group:
        group.start_soon(heartbeat.run)
        await until(lambda: clock.sleeping == 1)
        assert heartbeat.late() == 0.0
        clock.advance(1.0)  # on time
        await until(lambda: heartbeat.last == clock.now() and clock.sleeping == 1)
        assert heartbeat.lag == 0.0
        clock.advance(3.0)  # woken 2 s late: a loop busy elsewhere
        await until(lambda: heartbeat.last == clock.now() and clock.sleeping == 1)
        assert heartbeat.lag == pytest.approx(2.0)
        clock.advance(1.0)
        await until(lambda: heartbeat.last == clock.now() and clock.sleeping == 1)
        assert heartbeat.late() == 0.0  # one late wake-up is forgotten at the next
        # Not woken at all (the clock moved, the task did not run): late now.
        clock.t += 8.0
        assert heartbeat.late() == pytest.approx(7.0)
        group.cancel_scope.cancel()


def test_a_heartbeat_not_running_is_not_late() -> None:
    """With no server there is no heartbeat; the lag gauge must not grow for it."""
    clock = FakeClock()
    heartbeat = Heartbeat(clock=clock, interval=1.0)
    clock.advance(100.0)
    assert heartbeat.late() == 0.0


# -- the informer's side: its deadlines, scripted ---------------------------------------

INFO = RequestInfo("list", "pods")
LIST_PAGE: dict[str, Any] = {"items": [], "metadata": {"resourceVersion": "5"}}


class HangingWatches:
    """Lists answer (or fail, `fail_lists` times); every watch opens and then sends
    nothing, ever: a read deadline that does not fire, as a client bug would leave it."""

    def __init__(self, *, fail_lists: int = 0) -> None:
        self.fail_lists = fail_lists
        self.lists = 0
        self.watching = anyio.Event()

    async def list_page(
        self,
        path: str,
        *,
        info: RequestInfo,
        item: Callable[[dict[str, Any]], None],
        params: Sequence[tuple[str, str]] | None = None,
        wait: float | None = None,
    ) -> dict[str, Any]:
        self.lists += 1
        if self.lists <= self.fail_lists:
            raise ApiUnreachable("connection refused", request=info)
        return self.page(item)

    def page(self, item: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        return LIST_PAGE

    @contextlib.asynccontextmanager
    async def stream_lines(
        self,
        path: str,
        *,
        info: RequestInfo,
        params: Sequence[tuple[str, str]] | None = None,
        read_timeout: float,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        self.watching.set()
        yield self._nothing()

    async def _nothing(self) -> AsyncIterator[bytes]:
        await anyio.sleep_forever()
        yield b""  # pragma: no cover


WATCH_330 = InformerSettings(watch_timeout_min=300, watch_timeout_max=300, read_margin=30)


async def test_a_watch_hung_past_its_read_deadline_is_overdue() -> None:
    clock = FakeClock()
    client = HangingWatches()
    informer: Informer[Any] = Informer(
        client=client, resource=PODS, project=dict, settings=WATCH_330, clock=clock
    )
    assert informer.overdue() == -math.inf  # not started: nothing to wait for
    async with informer.changes, anyio.create_task_group() as group:
        group.start_soon(informer.run)
        await client.watching.wait()
        assert informer.overdue() == pytest.approx(-330.0)  # timeoutSeconds + margin
        clock.advance(330.0 + SETTINGS.stuck_after)
        assert liveness(loop_late=0, overdue={"pods": informer.overdue()}, settings=SETTINGS).ok
        clock.advance(1.0)
        report = liveness(loop_late=0, overdue={"pods": informer.overdue()}, settings=SETTINGS)
        assert not report.ok
        assert report.lines == ("informer pods: hung 61s past its own deadline (bound 60s)",)
        group.cancel_scope.cancel()


async def test_an_informer_retrying_an_unreachable_server_is_never_overdue() -> None:
    clock = FakeClock()
    client = HangingWatches(fail_lists=6)
    informer: Informer[Any] = Informer(
        client=client, resource=PODS, project=dict, settings=WATCH_330, clock=clock,
        server="https://10.0.0.1:6443",
    )  # fmt: skip
    async with informer.changes, anyio.create_task_group() as group:
        group.start_soon(informer.run)
        for failures in range(1, 7):
            await until(lambda n=failures: client.lists == n and clock.sleeping == 1)
            assert informer.overdue() <= 0  # waiting out its backoff: alive
            assert informer.problem is not None
            assert "cannot reach the API server at https://10.0.0.1:6443" in informer.problem
            clock.advance(clock.sleeps[-1])  # the backoff, to the end
        await client.watching.wait()
        assert informer.synced.is_set()
        assert informer.problem is None  # the server answered
        group.cancel_scope.cancel()


async def test_an_informer_waiting_for_its_consumer_is_not_overdue() -> None:
    """Back-pressure from our own engine is no hang: no deadline applies to it."""
    clock = FakeClock()
    listed = {"items": [_pod("a"), _pod("b")], "metadata": {"resourceVersion": "5"}}

    class OneList(HangingWatches):
        def page(self, item: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
            for obj in listed["items"]:
                item(obj)
            return {**listed, "items": []}

    settings = InformerSettings(watch_timeout_min=300, watch_timeout_max=300, buffer=0)
    informer: Informer[Any] = Informer(
        client=OneList(), resource=PODS, project=dict, settings=settings, clock=clock
    )
    async with informer.changes, anyio.create_task_group() as group:
        group.start_soon(informer.run)
        await informer.wait_synced()  # listed; now blocked handing over the first change
        clock.advance(10_000.0)
        assert informer.overdue() == -math.inf
        group.cancel_scope.cancel()


def _pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": name, "resourceVersion": "1"}}
