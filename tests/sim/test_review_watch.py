"""Review of LIST/WATCH semantics and write refusals against kube-apiserver's behaviour.

Each test pins one behaviour a list+watch client sees on a real cluster (the source it
follows is named in the test's docstring).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from probemarker.sim import SimCluster
from probemarker.sim.store.objects import Store
from probemarker.sim.store.resourcetype import ResourceType
from tests.sim.server_helpers import pod_manifest, raw

PODS = "/api/v1/namespaces/default/pods"
PODS_RT = ResourceType(group="", version="v1", plural="pods", kind="Pod", namespaced=True)


async def create(sim: SimCluster, name: str, **kwargs: Any) -> dict[str, Any]:
    code, body = await raw(sim, "POST", PODS, json=pod_manifest(name, node=None, **kwargs))
    assert code == 201, body
    return dict(body)


async def relabel(sim: SimCluster, name: str, labels: dict[str, str]) -> dict[str, Any]:
    code, body = await raw(
        sim,
        "PATCH",
        f"{PODS}/{name}",
        data=orjson.dumps({"metadata": {"labels": labels}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert code == 200, body
    return dict(body)


@contextlib.asynccontextmanager
async def open_watch(
    session: aiohttp.ClientSession, sim: SimCluster, **params: str
) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
    """The watch's events; the request has been answered (status line) on entry."""
    async with session.get(sim.url + PODS, params={"watch": "1", **params}) as response:
        assert response.status == 200, await response.text()

        async def events() -> AsyncIterator[dict[str, Any]]:
            async for line in response.content:
                if line.strip():
                    yield orjson.loads(line)

        yield events()


async def take(events: AsyncIterator[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async with asyncio.timeout(5):
        while len(out) < count:
            out.append(await anext(events))
    return out


async def drain(events: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    async with asyncio.timeout(5):
        return [e async for e in events]


def names(items: list[dict[str, Any]]) -> list[str]:
    return [item["metadata"]["name"] for item in items]


# ---------------------------------------------------------------------------- LIST


async def test_list_exact_reads_the_state_at_that_version(sim: SimCluster) -> None:
    """resourceVersionMatch=Exact (and the legacy limit+resourceVersion) read etcd at that
    revision (storage.ValidateListOptions), so later writes are not seen."""
    await create(sim, "a", labels={"v": "1"})
    _, listed = await raw(sim, "GET", PODS)
    rv = listed["metadata"]["resourceVersion"]
    await create(sim, "b")
    await relabel(sim, "a", {"v": "2"})
    code, exact = await raw(
        sim, "GET", PODS, params={"resourceVersion": rv, "resourceVersionMatch": "Exact"}
    )
    assert code == 200
    assert exact["metadata"]["resourceVersion"] == rv
    assert names(exact["items"]) == ["a"]
    assert exact["items"][0]["metadata"]["labels"] == {"v": "1"}
    code, legacy = await raw(sim, "GET", PODS, params={"resourceVersion": rv, "limit": "10"})
    assert code == 200
    assert names(legacy["items"]) == ["a"]
    code, newest = await raw(sim, "GET", PODS, params={"resourceVersion": rv})
    assert code == 200
    assert names(newest["items"]) == ["a", "b"]  # NotOlderThan: the latest


async def test_list_exact_older_than_history_is_410(sim: SimCluster) -> None:
    await create(sim, "a")
    sim.faults.drop_history()
    await create(sim, "b")
    code, body = await raw(
        sim, "GET", PODS, params={"resourceVersion": "2", "resourceVersionMatch": "Exact"}
    )
    assert code == 410
    assert body["reason"] == "Expired"
    assert body["message"] == "The resourceVersion for the provided list is too old."


async def test_list_not_older_than_a_future_version_waits_then_504(sim: SimCluster) -> None:
    """watchCache.waitUntilFreshAndBlock: storage.NewTooLargeResourceVersionError."""
    sim.store.fresh_wait = 0.2
    current = sim.store.resource_version
    async with aiohttp.ClientSession() as session:
        params = {"resourceVersion": str(current + 50)}
        async with session.get(sim.url + PODS, params=params) as response:
            assert response.status == 504
            assert response.headers["Retry-After"] == "1"
            body = await response.json()
    assert body["reason"] == "Timeout"
    assert body["message"] == (
        f"Timeout: Too large resource version: {current + 50}, current: {current}"
    )
    assert body["details"] == {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }


async def test_wait_fresh_returns_once_the_version_is_reached() -> None:
    store = Store()
    waiting = asyncio.ensure_future(store.wait_fresh(store.resource_version + 1, within=5))
    try:
        await asyncio.sleep(0)
        assert not waiting.done()
        store.create(PODS_RT, pod_manifest("late", node=None), namespace="default")
        await asyncio.wait_for(waiting, 5)
    finally:
        waiting.cancel()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"resourceVersionMatch": "NotOlderThan"},
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            {"resourceVersion": "0", "resourceVersionMatch": "Exact"},
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
            'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
        ),
        (
            {"resourceVersion": "1", "resourceVersionMatch": "Newest"},
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: '
            '"Newest": supported values: "Exact", "NotOlderThan", ""',
        ),
        (
            {"sendInitialEvents": "true"},
            'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: '
            "sendInitialEvents is forbidden for list",
        ),
    ],
)
async def test_list_options_validation(
    sim: SimCluster, params: dict[str, str], message: str
) -> None:
    """internalversion/validation.ValidateListOptions, answered with NewInvalid (422)."""
    code, body = await raw(sim, "GET", PODS, params=params)
    assert code == 422
    assert body["reason"] == "Invalid"
    assert body["message"] == message
    assert body["details"]["kind"] == "ListOptions"
    assert body["details"]["group"] == "meta.k8s.io"


async def test_continue_pages_are_one_consistent_snapshot(sim: SimCluster) -> None:
    for name in ("a", "b", "c"):
        await create(sim, name, labels={"v": "1"})
    code, first = await raw(sim, "GET", PODS, params={"limit": "1"})
    assert code == 200
    assert names(first["items"]) == ["a"]
    assert first["metadata"]["remainingItemCount"] == 2
    await relabel(sim, "b", {"v": "2"})
    await create(sim, "bb")
    token = first["metadata"]["continue"]
    code, rest = await raw(sim, "GET", PODS, params={"limit": "5", "continue": token})
    assert code == 200
    assert names(rest["items"]) == ["b", "c"]
    assert rest["items"][0]["metadata"]["labels"] == {"v": "1"}
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert "continue" not in rest["metadata"]


async def test_continue_with_resource_version_is_400(sim: SimCluster) -> None:
    await create(sim, "a")
    await create(sim, "b")
    _, first = await raw(sim, "GET", PODS, params={"limit": "1"})
    code, body = await raw(
        sim,
        "GET",
        PODS,
        params={"continue": first["metadata"]["continue"], "resourceVersion": "5"},
    )
    assert code == 400
    assert body["message"] == "specifying resource version is not allowed when using continue"


async def test_expired_continue_is_410_with_a_latest_token(sim: SimCluster) -> None:
    """etcd3 handleCompactedErrorForPaging: the Status carries metadata.continue, a token
    with resourceVersion -1 that continues the list at the latest state."""
    for name in ("a", "b", "c"):
        await create(sim, name)
    _, first = await raw(sim, "GET", PODS, params={"limit": "1"})
    await create(sim, "d")
    sim.faults.drop_history()
    code, body = await raw(
        sim, "GET", PODS, params={"limit": "1", "continue": first["metadata"]["continue"]}
    )
    assert code == 410
    assert body["reason"] == "Expired"
    assert body["message"].startswith(
        "The provided continue parameter is too old to display a consistent list result. "
        "You can start a new list without the continue parameter, or use the continue token "
        "in this response"
    )
    token = body["metadata"]["continue"]
    decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    assert decoded["rv"] == -1
    code, rest = await raw(sim, "GET", PODS, params={"continue": token})
    assert code == 200
    assert names(rest["items"]) == ["b", "c", "d"]
    assert rest["metadata"]["resourceVersion"] == str(sim.store.resource_version)


async def test_field_selector_spec_node_name(sim: SimCluster) -> None:
    code, _ = await raw(sim, "POST", PODS, json=pod_manifest("on-2", node="node-2"))
    assert code == 201
    await create(sim, "nowhere")
    code, body = await raw(
        sim, "GET", "/api/v1/pods", params={"fieldSelector": "spec.nodeName=node-2"}
    )
    assert code == 200
    assert names(body["items"]) == ["on-2"]
    code, body = await raw(sim, "GET", PODS, params={"fieldSelector": "spec.nodeName="})
    assert code == 200
    assert names(body["items"]) == ["nowhere"]
    code, body = await raw(sim, "GET", PODS, params={"fieldSelector": "spec.bogus=x"})
    assert code == 400
    assert body["message"] == "field label not supported: spec.bogus"


# ---------------------------------------------------------------------------- WATCH


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"sendInitialEvents": "true"},
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            {"resourceVersionMatch": "NotOlderThan", "resourceVersion": "1"},
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
    ],
)
async def test_watch_options_validation(
    sim: SimCluster, params: dict[str, str], message: str
) -> None:
    """internalversion/validation.validateWatchOptions."""
    code, body = await raw(sim, "GET", PODS, params={"watch": "1", **params})
    assert code == 422
    assert body["message"] == message


async def test_watch_list_protocol(sim: SimCluster) -> None:
    """sendInitialEvents=true&resourceVersionMatch=NotOlderThan: the state as ADDED, one
    BOOKMARK holding only the resourceVersion and the initial-events-end annotation,
    then live events."""
    await create(sim, "a")
    await create(sim, "b")
    async with (
        aiohttp.ClientSession() as session,
        open_watch(
            session,
            sim,
            sendInitialEvents="true",
            resourceVersionMatch="NotOlderThan",
            allowWatchBookmarks="true",
            resourceVersion="",
        ) as events,
    ):
        first = await take(events, 3)
        await create(sim, "c")
        (live,) = await take(events, 1)
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in first[:2]] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]
    assert first[2] == {
        "type": "BOOKMARK",
        "object": {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "resourceVersion": first[1]["object"]["metadata"]["resourceVersion"],
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        },
    }
    assert (live["type"], live["object"]["metadata"]["name"]) == ("ADDED", "c")


async def test_send_initial_events_false_starts_without_state(sim: SimCluster) -> None:
    """Cacher.Watch: sendInitialEvents=false and resourceVersion "0" start at Any (now),
    with no initial events."""
    await create(sim, "old")
    async with (
        aiohttp.ClientSession() as session,
        open_watch(
            session,
            sim,
            sendInitialEvents="false",
            resourceVersionMatch="NotOlderThan",
            resourceVersion="0",
        ) as events,
    ):
        await create(sim, "new")
        (event,) = await take(events, 1)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "new")


async def test_watch_from_a_future_version_waits_for_it(sim: SimCluster) -> None:
    """getAllEventsSinceLocked accepts a version newer than the cache; the watcher only
    delivers events after it (cacheWatcher.process)."""
    future = sim.store.resource_version + 2
    async with (
        aiohttp.ClientSession() as session,
        open_watch(session, sim, resourceVersion=str(future)) as events,
    ):
        for name in ("x1", "x2", "x3"):
            await create(sim, name)
        (event,) = await take(events, 1)
    assert event["object"]["metadata"]["name"] == "x3"


async def test_watch_list_for_a_future_version_ends_with_504_error_event(
    sim: SimCluster,
) -> None:
    """waitUntilWatchCacheFreshAndForceAllEvents fails after the wait: an ERROR event with
    the Too large Status in a 200 stream (newErrWatcher), then the end."""
    sim.store.fresh_wait = 0.1
    future = sim.store.resource_version + 10
    async with (
        aiohttp.ClientSession() as session,
        open_watch(
            session,
            sim,
            sendInitialEvents="true",
            resourceVersionMatch="NotOlderThan",
            resourceVersion=str(future),
        ) as stream,
    ):
        events = await drain(stream)
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 504
    assert events[0]["object"]["reason"] == "Timeout"


async def test_watch_too_old_is_410_error_event_then_end(sim: SimCluster) -> None:
    await create(sim, "a")
    sim.faults.drop_history()
    async with (
        aiohttp.ClientSession() as session,
        open_watch(session, sim, resourceVersion="2") as stream,
    ):
        events = await drain(stream)
    assert len(events) == 1
    status = events[0]["object"]
    assert events[0]["type"] == "ERROR"
    assert (status["code"], status["reason"], status["kind"]) == (410, "Expired", "Status")
    assert status["message"].startswith("too old resource version: 2 (")


async def test_timeout_seconds_zero_means_the_default(sim: SimCluster) -> None:
    """watch.go: a zero timeoutSeconds is the server's own request timeout."""
    async with (
        aiohttp.ClientSession() as session,
        open_watch(
            session, sim, timeoutSeconds="0", resourceVersion=str(sim.store.resource_version)
        ) as events,
    ):
        await create(sim, "a")
        (event,) = await take(events, 1)
    assert event["type"] == "ADDED"


async def test_watch_selector_changes_are_added_and_deleted(sim: SimCluster) -> None:
    """cacheWatcher.convertToWatchEvent: starting to match is ADDED, ceasing to match is
    DELETED carrying the last matching state at the write's resourceVersion."""
    await create(sim, "p", labels={"app": "db"})
    async with (
        aiohttp.ClientSession() as session,
        open_watch(
            session, sim, labelSelector="app=web", resourceVersion=str(sim.store.resource_version)
        ) as events,
    ):
        await relabel(sim, "p", {"app": "web"})
        gone = await relabel(sim, "p", {"app": "db"})
        seen = await take(events, 2)
    assert [e["type"] for e in seen] == ["ADDED", "DELETED"]
    assert seen[1]["object"]["metadata"]["labels"] == {"app": "web"}
    assert seen[1]["object"]["metadata"]["resourceVersion"] == gone["metadata"]["resourceVersion"]


# ---------------------------------------------------------------------------- writes


async def test_json_patch_test_failure_is_a_generic_422(sim: SimCluster) -> None:
    """handlers/patch.go: NewGenericServerResponse(422, ...) with the json-patch error as
    no causes: the json-patch error does not reach the client."""
    await create(sim, "t")
    code, body = await raw(
        sim,
        "PATCH",
        f"{PODS}/t/status",
        data=orjson.dumps(
            [
                {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
                {"op": "replace", "path": "/status/phase", "value": "Failed"},
            ]
        ),
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert code == 422
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server rejected our request due to an error in our request",
        "reason": "Invalid",
        "details": {},
        "code": 422,
    }


async def test_patch_of_a_missing_object_is_404(sim: SimCluster) -> None:
    code, body = await raw(
        sim,
        "PATCH",
        f"{PODS}/nope",
        data=b"{}",
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert code == 404
    assert body["message"] == 'pods "nope" not found'
    assert body["details"] == {"name": "nope", "kind": "pods"}


async def test_apply_patch_is_refused_as_without_server_side_apply(sim: SimCluster) -> None:
    await create(sim, "s")
    code, body = await raw(
        sim,
        "PATCH",
        f"{PODS}/s",
        data=b"{}",
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert code == 415
    assert body["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json"
    )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"dryRun": "Some"},
            'PatchOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
            '[]string{"Some"}: supported values: "All"',
        ),
        (
            {"fieldValidation": "strict"},
            'PatchOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: '
            '"strict": supported values: "", "Ignore", "Strict", "Warn"',
        ),
        (
            {"fieldManager": "m" * 129},
            'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more '
            "than 128 bytes",
        ),
    ],
)
async def test_patch_options_validation(
    sim: SimCluster, params: dict[str, str], message: str
) -> None:
    """meta/v1/validation.ValidatePatchOptions, answered with NewInvalid (422)."""
    await create(sim, "o")
    code, body = await raw(
        sim,
        "PATCH",
        f"{PODS}/o",
        params=params,
        data=b"{}",
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert code == 422
    assert body["message"] == message


async def test_field_manager_and_dry_run_are_accepted(sim: SimCluster) -> None:
    created = await create(sim, "d")
    code, body = await raw(
        sim,
        "PATCH",
        f"{PODS}/d",
        params={"fieldManager": "probemarker", "dryRun": "All"},
        data=orjson.dumps({"metadata": {"labels": {"x": "y"}}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert code == 200
    assert body["metadata"]["labels"] == {"x": "y"}
    _, stored = await raw(sim, "GET", f"{PODS}/d")
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_stale_update_is_409_conflict(sim: SimCluster) -> None:
    created = await create(sim, "c")
    await relabel(sim, "c", {"n": "1"})
    code, body = await raw(sim, "PUT", f"{PODS}/c", json=created)
    assert code == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on pods "c": the object has been modified; please '
        "apply your changes to the latest version and try again"
    )
    assert body["details"] == {"name": "c", "kind": "pods"}


# ---------------------------------------------------------------------------- store


async def test_listed_items_do_not_change_with_later_writes() -> None:
    store = Store()
    store.create(PODS_RT, pod_manifest("a", node=None), namespace="default")
    page = store.list(PODS_RT, namespace="default")
    before = orjson.dumps(page.items)
    watch = store.watch(PODS_RT, namespace="default")
    store.update(
        PODS_RT,
        {
            **pod_manifest("a", node=None, labels={"x": "y"}),
            "metadata": {"name": "a", "labels": {"x": "y"}},
        },
        namespace="default",
        name="a",
    )
    assert orjson.dumps(page.items) == before
    first = await anext(aiter(watch))
    assert first.object["metadata"].get("labels") in (None, {})
    watch.close()


async def test_list_from_version_zero_ignores_limit(sim: SimCluster) -> None:
    """Cacher.GetList serves resourceVersion "0" from the watch cache, which does not
    paginate (shouldDelegateList: a limit only goes to etcd when the version is not "0")."""
    for name in ("a", "b", "c"):
        await create(sim, name)
    code, body = await raw(sim, "GET", PODS, params={"resourceVersion": "0", "limit": "1"})
    assert code == 200
    assert names(body["items"]) == ["a", "b", "c"]
    assert "continue" not in body["metadata"]


def test_any_watch_value_but_false_asks_for_a_watch() -> None:
    """requestinfo.go: ``watch`` values other than false/0 make the verb watch."""
    from probemarker.sim.server.request.requestinfo import parse_request_info

    def verb(value: str) -> str:
        info = parse_request_info("GET", PODS, {"watch": value})
        assert info is not None
        return info.verb

    assert [verb(v) for v in ("true", "1", "yes", "", "False", "0")] == [
        "watch",
        "watch",
        "watch",
        "watch",
        "list",
        "list",
    ]


async def test_a_sim_failure_is_a_500_internal_error_status(
    sim: SimCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """errors.NewInternalError: message "Internal error occurred: <err>", one cause."""

    def broken(*args: object, **kwargs: object) -> dict[str, Any]:
        raise RuntimeError("boom")

    assert sim.server is not None
    monkeypatch.setattr(sim.server._resources, "get", broken)
    code, body = await raw(sim, "GET", f"{PODS}/x")
    assert code == 500
    assert body["reason"] == "InternalError"
    assert body["message"] == "Internal error occurred: RuntimeError('boom')"
    assert body["details"] == {"causes": [{"message": "RuntimeError('boom')"}]}


async def test_paginated_not_older_than_a_future_version_is_refused_at_once(
    sim: SimCluster,
) -> None:
    """A limit sends NotOlderThan lists to etcd (shouldDelegateList), whose
    validateMinimumResourceVersion refuses a future version at once, with no retry hint."""
    sim.store.fresh_wait = 30  # would time the test out if the list waited
    current = sim.store.resource_version
    params = {
        "resourceVersion": str(current + 5),
        "resourceVersionMatch": "NotOlderThan",
        "limit": "10",
    }
    code, body = await raw(sim, "GET", PODS, params=params)
    assert code == 504
    assert (
        body["message"] == f"Timeout: Too large resource version: {current + 5}, current: {current}"
    )
    assert "retryAfterSeconds" not in body["details"]
