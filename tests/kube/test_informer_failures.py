"""How the informer reports failures: one line per kind at most once a minute, naming the
server when it is unreachable and the fix when a resource is not served (a CRD not
installed); no `namespace=None` in its lines."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from probemarker.kit.backoff import BackoffSettings
from probemarker.kit.repeats import Repeats
from probemarker.kube.connect.errors import (
    ApiForbidden,
    ApiNotFound,
    ApiTimeout,
    ApiUnreachable,
    KubeError,
    RequestInfo,
)
from probemarker.kube.connect.resources import PODS, Resource
from probemarker.kube.watch.informer import Informer, InformerSettings
from probemarker.kube.watch.informerfailures import describe_failure
from tests.fakes import FakeClock

MARKERS = Resource("probemarker.io", "v1alpha1", "podprobemarkers")
LIST = RequestInfo("list", "podprobemarkers", group="probemarker.io")


# -- Repeats ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("times", "expected"),
    [
        pytest.param([0], [0], id="first-at-once"),
        pytest.param([0, 10, 59.9], [0, None, None], id="held-within-the-interval"),
        pytest.param([0, 10, 20, 60], [0, None, None, 2], id="then-says-how-many"),
        pytest.param([0, 60, 120], [0, 0, 0], id="spaced-out"),
        pytest.param([0, 30, 60, 61, 130], [0, None, 1, None, 1], id="counts-restart"),
    ],
)
def test_repeats(times: list[float], expected: list[int | None]) -> None:
    repeats = Repeats(interval=60.0)
    assert [repeats.due("k", t) for t in times] == expected


def test_repeats_keys_are_independent_and_clear_forgets() -> None:
    repeats = Repeats(interval=60.0)
    assert repeats.due("a", 0) == 0
    assert repeats.due("b", 1) == 0
    assert repeats.due("a", 2) is None
    repeats.clear("a")
    assert repeats.due("a", 3) == 0


# -- describe_failure ------------------------------------------------------------------


def test_not_served_says_what_to_do() -> None:
    failure = describe_failure(
        ApiNotFound("the server could not find the requested resource", code=404, request=LIST),
        listing=True,
        resource=MARKERS,
        server="https://api:6443",
        missing_hint="install it: kubectl apply -f manifests/crd/",
    )
    assert failure.event == "informer.not_served"
    assert failure.fields["message"] == (
        "the API server does not serve podprobemarkers.probemarker.io/v1alpha1: "
        "install it: kubectl apply -f manifests/crd/; waiting for it"
    )


def test_unreachable_names_the_server_and_is_one_problem_for_every_informer() -> None:
    err = ApiUnreachable("ClientConnectorError: Connect call failed", request=LIST)
    keys = set()
    for resource, listing in ((PODS, True), (MARKERS, True), (MARKERS, False)):
        failure = describe_failure(
            err, listing=listing, resource=resource, server="https://api:6443", missing_hint=""
        )
        assert failure.event == "informer.unreachable"
        assert failure.fields["message"] == (
            "cannot reach the API server at https://api:6443: "
            "ClientConnectorError: Connect call failed; retrying"
        )
        keys.add(failure.key)
    assert keys == {("unreachable",)}


@pytest.mark.parametrize(
    ("err", "listing", "event"),
    [
        pytest.param(ApiNotFound("gone", code=404), False, "informer.watch_restarted", id="watch"),
        pytest.param(ApiForbidden("no", code=403), True, "informer.list_failed", id="forbidden"),
        pytest.param(ApiTimeout("slow"), False, "informer.unreachable", id="timeout"),
    ],
)
def test_other_failures(err: KubeError, listing: bool, event: str) -> None:
    failure = describe_failure(err, listing=listing, resource=PODS, server="", missing_hint="")
    assert failure.event == event


# -- the informer's lines --------------------------------------------------------------


class Scripted:
    """LISTs fail with `errors` (in turn), then answer an empty list; watches fail with
    `watch_errors`, then stay open and silent."""

    def __init__(self, errors: list[KubeError], watch_errors: list[KubeError] = ()) -> None:  # type: ignore[assignment]
        self.errors = list(errors)
        self.watch_errors = list(watch_errors)

    async def list_page(self, path: str, **_: Any) -> dict[str, Any]:
        if self.errors:
            raise self.errors.pop(0)
        return {"items": [], "metadata": {"resourceVersion": "7"}}

    @contextlib.asynccontextmanager
    async def stream_lines(self, path: str, **_: Any) -> AsyncIterator[AsyncIterator[bytes]]:
        if self.watch_errors:
            raise self.watch_errors.pop(0)
        await anyio.sleep_forever()
        yield _nothing()  # pragma: no cover


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover


def informer(client: Scripted, clock: FakeClock, **kwargs: Any) -> Informer[Any]:
    steady = BackoffSettings(initial=10.0, maximum=10.0, jitter=0.0)  # a failure every 10 s
    return Informer(
        client=client,
        resource=MARKERS,
        project=lambda obj: obj,
        settings=InformerSettings(backoff=steady),
        clock=clock,
        server="https://api:6443",
        **kwargs,
    )


async def run_until_synced(subject: Informer[Any], *, after: float = 0.0) -> None:
    with anyio.fail_after(10):
        async with subject.changes, anyio.create_task_group() as group:
            group.start_soon(subject.run)
            await subject.wait_synced()
            await anyio.sleep(after)
            group.cancel_scope.cancel()


async def test_an_outage_is_one_line_a_minute() -> None:
    """20 failures 10 s apart: lines at 0, 60, 120 and 180 s, each saying how many
    were held back (before: one warning per failure, each a raw exception)."""
    clock = FakeClock(auto=True)
    errors: list[KubeError] = [ApiUnreachable("refused", request=LIST) for _ in range(20)]
    with capture_logs() as logs:
        await run_until_synced(informer(Scripted(errors), clock))
    lines = [line for line in logs if line["event"] == "informer.unreachable"]
    assert [line.get("held_back", 0) for line in lines] == [0, 5, 5, 5]
    assert (
        lines[0]["message"] == "cannot reach the API server at https://api:6443: refused; retrying"
    )
    assert lines[0]["log_level"] == "warning"


async def test_a_missing_crd_says_so_once_a_minute_and_keeps_waiting() -> None:
    clock = FakeClock(auto=True)
    errors: list[KubeError] = [ApiNotFound("not found", code=404, request=LIST) for _ in range(7)]
    with capture_logs() as logs:
        await run_until_synced(
            informer(Scripted(errors), clock, missing_hint="kubectl apply -f manifests/crd/")
        )
    lines = [line for line in logs if line["event"] == "informer.not_served"]
    assert len(lines) == 2  # at 0 and 60 s; listed at 70 s
    assert "kubectl apply -f manifests/crd/" in lines[0]["message"]
    assert any(line["event"] == "informer.listed" for line in logs)


async def test_after_recovering_the_next_failure_is_logged_at_once() -> None:
    clock = FakeClock(auto=True)
    client = Scripted(
        [ApiUnreachable("refused", request=LIST)],
        watch_errors=[ApiUnreachable("reset", request=LIST)],
    )
    with capture_logs() as logs:
        await run_until_synced(informer(client, clock), after=0.05)
    lines = [line for line in logs if line["event"] == "informer.unreachable"]
    assert [line["message"].split(": ")[1] for line in lines] == [
        "refused; retrying",
        "reset; retrying",
    ]


@pytest.mark.parametrize(
    ("namespaces", "expected"),
    [pytest.param(None, None, id="all-namespaces"), pytest.param(["web"], "web", id="one")],
)
async def test_lines_name_a_namespace_only_when_there_is_one(
    namespaces: list[str] | None, expected: str | None
) -> None:
    clock = FakeClock(auto=True)
    errors: list[KubeError] = [ApiForbidden("no", code=403, request=LIST)]
    with capture_logs() as logs:
        await run_until_synced(informer(Scripted(errors), clock, namespaces=namespaces))
    mine = [line for line in logs if line["event"].startswith("informer.")]
    assert {line["event"] for line in mine} == {"informer.list_failed", "informer.listed"}
    for line in mine:
        assert line.get("namespace") == expected
        assert ("namespace" in line) == (expected is not None)
