"""The store's CRUD, LIST and WATCH follow the API server's semantics."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from probemarker.sim.errors import AlreadyExists, BadRequest, Conflict, Expired, Invalid, NotFound
from probemarker.sim.store.objects import ResourceType, Store, WatchEvent, prune_empty

PODS = ResourceType(
    group="",
    version="v1",
    plural="pods",
    kind="Pod",
    namespaced=True,
    subresources=frozenset({"status", "exec"}),
    singular="pod",
)
NODES = ResourceType(group="", version="v1", plural="nodes", kind="Node", namespaced=False)
PPM = ResourceType(group="probemarker.io", version="v1alpha1", plural="podprobemarkers",
                   kind="PodProbeMarker", namespaced=True, subresources=frozenset({"status"}),
                   is_custom=True)  # fmt: skip
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def store() -> Store:
    return Store(clock=FakeClock(), history_limit=100)


def pod(
    name: str, *, labels: dict[str, str] | None = None, node: str | None = "node-a", **status: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx"}]}
    if node:
        spec["nodeName"] = node
    out: dict[str, Any] = {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}
    if status:
        out["status"] = status
    return out


def marker(name: str, spec: Any = None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec or {"probes": []}, "status": {"x": 1}}


# ------------------------------------------------------------------ create / get


def test_create_sets_system_fields(store: Store) -> None:
    created = store.create(PODS, pod("web-0"), namespace="default")
    meta = created["metadata"]
    assert meta["namespace"] == "default"
    assert meta["creationTimestamp"] == "2026-01-02T03:04:05Z"
    assert meta["resourceVersion"] == str(store.resource_version)
    assert "generation" not in meta  # pods track generation only from Kubernetes 1.33
    assert len(meta["uid"]) == 36
    assert created["apiVersion"] == "v1"
    assert created["kind"] == "Pod"
    assert "labels" not in meta  # empty maps are dropped, as omitempty does
    assert store.get(PODS, "default", "web-0") == created


def test_resource_version_is_cluster_wide(store: Store) -> None:
    a = store.create(PODS, pod("a"), namespace="default")
    b = store.create(NODES, {"metadata": {"name": "node-a"}}, namespace=None)
    c = store.create(PPM, marker("m"), namespace="default")
    rvs = [int(o["metadata"]["resourceVersion"]) for o in (a, b, c)]
    assert rvs == sorted(rvs)
    assert len(set(rvs)) == 3
    assert "generation" not in b["metadata"]


def test_generate_name(store: Store) -> None:
    created = store.create(
        PODS, {"metadata": {"generateName": "web-"}, "spec": {}}, namespace="default"
    )
    name = created["metadata"]["name"]
    assert name.startswith("web-")
    assert len(name) == 9
    assert set(name[4:]) <= set("bcdfghjklmnpqrstvwxz2456789")


@pytest.mark.parametrize(
    ("namespace", "name", "error", "message"),
    [
        pytest.param("default", "web-0", AlreadyExists, 'pods "web-0" already exists', id="already-exists"),
        pytest.param("nope", "x", NotFound, 'namespaces "nope" not found', id="namespace-missing"),
        pytest.param("default", "Bad_Name", Invalid, 'Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain', id="bad-name"),
    ],
)  # fmt: skip
def test_create_refusals(
    store: Store, namespace: str, name: str, error: type[Exception], message: str
) -> None:
    store.create(PODS, pod("web-0"), namespace="default")
    with pytest.raises(error) as err:
        store.create(PODS, pod(name), namespace=namespace)
    assert str(err.value).startswith(message)


def test_initial_namespaces_exist(store: Store) -> None:
    for ns in ("default", "kube-system"):
        store.create(PODS, pod("p"), namespace=ns)


def test_get_missing_custom_resource(store: Store) -> None:
    with pytest.raises(NotFound) as err:
        store.get(PPM, "default", "m")
    status = err.value.to_status()
    assert status["message"] == 'podprobemarkers.probemarker.io "m" not found'
    assert status["details"] == {"name": "m", "group": "probemarker.io", "kind": "podprobemarkers"}


def test_custom_resource_create_drops_status_and_keeps_empty_lists(store: Store) -> None:
    created = store.create(PPM, marker("m", {"probes": [], "x": {}}), namespace="default")
    assert "status" not in created
    assert created["spec"] == {"probes": [], "x": {}}
    assert created["metadata"]["generation"] == 1


# ------------------------------------------------------------------ update


def test_stale_update_conflicts(store: Store) -> None:
    first = store.create(PODS, pod("web-0"), namespace="default")
    store.update(
        PODS,
        first | {"metadata": first["metadata"] | {"labels": {"a": "1"}}},
        namespace="default",
        name="web-0",
    )
    with pytest.raises(Conflict) as err:
        store.update(PODS, first, namespace="default", name="web-0")
    assert err.value.message == (
        'Operation cannot be fulfilled on pods "web-0": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_unconditional_update_pods_allowed_custom_refused(store: Store) -> None:
    store.create(PODS, pod("p"), namespace="default")
    store.update(PODS, pod("p", labels={"a": "b"}), namespace="default", name="p")
    store.create(PPM, marker("m"), namespace="default")
    with pytest.raises(Invalid) as err:
        store.update(PPM, marker("m", {"probes": [1]}), namespace="default", name="m")
    assert err.value.message == (
        'podprobemarkers.probemarker.io "m" is invalid: metadata.resourceVersion: '
        "Invalid value: 0: must be specified for an update"
    )


def test_main_resource_write_ignores_status(store: Store) -> None:
    store.create(PODS, pod("p", phase="Pending"), namespace="default")
    out = store.update(
        PODS, pod("p", labels={"a": "b"}, phase="Running"), namespace="default", name="p"
    )
    assert out["status"] == {"phase": "Pending"}
    assert out["metadata"]["labels"] == {"a": "b"}


def test_pod_status_write_keeps_spec_takes_labels_not_owner_refs(store: Store) -> None:
    created = store.create(PODS, pod("p", phase="Pending"), namespace="default")
    body = pod("p", labels={"probe": "ok"}, node="elsewhere", phase="Running")
    body["metadata"]["annotations"] = {"x": "y"}
    body["metadata"]["ownerReferences"] = [
        {"uid": "u", "name": "o", "kind": "K", "apiVersion": "v1"}
    ]
    body["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    out = store.update(PODS, body, namespace="default", name="p", subresource="status")
    assert out["spec"]["nodeName"] == "node-a"
    assert out["status"]["phase"] == "Running"
    assert out["metadata"]["labels"] == {"probe": "ok"}
    assert out["metadata"]["annotations"] == {"x": "y"}
    assert "ownerReferences" not in out["metadata"]


def test_custom_status_write_changes_only_status(store: Store) -> None:
    created = store.create(PPM, marker("m"), namespace="default")
    body = marker("m", {"probes": ["changed"]})
    body["metadata"].update(
        labels={"a": "b"}, resourceVersion=created["metadata"]["resourceVersion"]
    )
    body["status"] = {"ok": True}
    out = store.update(PPM, body, namespace="default", name="m", subresource="status")
    assert out["status"] == {"ok": True}
    assert out["spec"] == {"probes": []}
    assert "labels" not in out["metadata"]
    assert out["metadata"]["generation"] == 1


@pytest.mark.parametrize(
    ("change", "generation"),
    [
        pytest.param(lambda o: o["spec"].update(probes=[1]), 2, id="spec-change-bumps"),
        pytest.param(
            lambda o: o["metadata"].update(labels={"a": "b"}), 1, id="metadata-change-keeps"
        ),
        pytest.param(lambda o: o.update(status={"y": 2}), 1, id="status-ignored-keeps"),
    ],
)
def test_custom_resource_generation(store: Store, change: Any, generation: int) -> None:
    created = store.create(PPM, marker("m"), namespace="default")
    change(created)
    out = store.update(PPM, created, namespace="default", name="m")
    assert out["metadata"]["generation"] == generation


def test_pod_spec_change_bumps_generation() -> None:
    store = Store(clock=FakeClock(), pod_generation=True)
    created = store.create(PODS, pod("p"), namespace="default")
    assert created["metadata"]["generation"] == 1
    created["spec"]["containers"][0]["image"] = "nginx:2"
    assert store.update(PODS, created, namespace="default", name="p")["metadata"]["generation"] == 2


def test_noop_update_does_not_bump_resource_version(store: Store) -> None:
    created = store.create(PODS, pod("p"), namespace="default")
    rv = store.resource_version
    out = store.update(PODS, created, namespace="default", name="p")
    assert store.resource_version == rv
    assert out["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_update_keeps_system_metadata(store: Store) -> None:
    created = store.create(PODS, pod("p"), namespace="default")
    body = pod("p", labels={"a": "b"})
    body["metadata"].update(creationTimestamp="1999-01-01T00:00:00Z", generation=9)
    out = store.update(PODS, body, namespace="default", name="p")
    for key in ("uid", "creationTimestamp", "generation"):
        assert out["metadata"].get(key) == created["metadata"].get(key)


def test_stored_pods_drop_empty_conditions(store: Store) -> None:
    created = store.create(PODS, pod("p", phase="Pending", conditions=[]), namespace="default")
    assert created["status"] == {"phase": "Pending"}


def test_prune_empty_keeps_empty_structs() -> None:
    obj: dict[str, Any] = {
        "spec": {"securityContext": {}, "nodeSelector": {}, "volumes": [], "x": None}
    }
    assert prune_empty(obj) == {"spec": {"securityContext": {}}}


# ------------------------------------------------------------------ delete


def test_pod_graceful_delete() -> None:
    store = Store(clock=FakeClock(), pod_generation=True)
    body = pod("p")
    body["spec"]["terminationGracePeriodSeconds"] = 10
    store.create(PODS, body, namespace="default")
    out = store.delete(PODS, "default", "p", now=T0)
    assert out["metadata"]["deletionTimestamp"] == "2026-01-02T03:04:15Z"
    assert out["metadata"]["deletionGracePeriodSeconds"] == 10
    assert out["metadata"]["generation"] == 2
    shorter = store.delete(
        PODS, "default", "p", grace_period_seconds=4, now=T0 + timedelta(seconds=1)
    )
    assert shorter["metadata"]["deletionTimestamp"] == "2026-01-02T03:04:09Z"
    assert store.get(PODS, "default", "p")
    store.finalize_pod_deletion("default", "p")
    with pytest.raises(NotFound):
        store.get(PODS, "default", "p")


@pytest.mark.parametrize(
    ("body", "grace"),
    [
        pytest.param(pod("p", node=None), None, id="unscheduled"),
        pytest.param(pod("p", phase="Succeeded"), None, id="terminal"),
        pytest.param(pod("p"), 0, id="grace-zero"),
    ],
)
def test_pod_immediate_delete(store: Store, body: dict[str, Any], grace: int | None) -> None:
    store.create(PODS, body, namespace="default")
    store.delete(PODS, "default", "p", grace_period_seconds=grace)
    with pytest.raises(NotFound):
        store.get(PODS, "default", "p")


def test_finalizers_hold_deletion_until_removed(store: Store) -> None:
    body = marker("m")
    body["metadata"]["finalizers"] = ["example.com/f"]
    store.create(PPM, body, namespace="default")
    held = store.delete(PPM, "default", "m")
    assert held["metadata"]["deletionTimestamp"] == "2026-01-02T03:04:05Z"
    held["metadata"]["finalizers"] = []
    store.update(PPM, held, namespace="default", name="m")
    with pytest.raises(NotFound):
        store.get(PPM, "default", "m")


# ------------------------------------------------------------------ list


def test_list_order_selectors_and_pages(store: Store) -> None:
    store.create(NODES, {"metadata": {"name": "n"}}, namespace=None)
    store.create(store_ns := PODS, pod("b", labels={"app": "x"}), namespace="default")
    store.create(PODS, pod("a", labels={"app": "x"}), namespace="default")
    store.create(PODS, pod("c", labels={"app": "y"}, node="node-b"), namespace="kube-system")
    names = [
        (i["metadata"]["namespace"], i["metadata"]["name"]) for i in store.list(store_ns).items
    ]
    assert names == [("default", "a"), ("default", "b"), ("kube-system", "c")]
    assert [i["metadata"]["name"] for i in store.list(PODS, namespace="kube-system").items] == ["c"]
    assert [i["metadata"]["name"] for i in store.list(PODS, label_selector="app=x").items] == [
        "a",
        "b",
    ]
    assert [
        i["metadata"]["name"] for i in store.list(PODS, field_selector="spec.nodeName=node-b").items
    ] == ["c"]
    page = store.list(PODS, limit=2)
    assert len(page.items) == 2
    assert page.remaining == 1
    assert page.continue_token
    rest = store.list(PODS, limit=2, continue_token=page.continue_token)
    assert [i["metadata"]["name"] for i in rest.items] == ["c"]
    assert rest.continue_token is None
    assert rest.resource_version == page.resource_version


def test_list_key_order_is_etcd_order(store: Store) -> None:
    store.create(NODES, {"metadata": {"name": "a"}}, namespace=None)
    store.create(NODES, {"metadata": {"name": "a-b"}}, namespace=None)
    store.create(NODES, {"metadata": {"name": "a.b"}}, namespace=None)
    assert [i["metadata"]["name"] for i in store.list(NODES).items] == ["a", "a-b", "a.b"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        pytest.param({"field_selector": "spec.foo=1"}, BadRequest, id="unsupported-field"),
        pytest.param({"label_selector": "a in"}, BadRequest, id="bad-label-selector"),
        pytest.param({"continue_token": "garbage!"}, BadRequest, id="bad-continue"),
    ],
)
def test_list_refusals(store: Store, kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        store.list(PODS, **kwargs)


def test_expired_continue_token(store: Store) -> None:
    for name in "abc":
        store.create(PODS, pod(name), namespace="default")
    page = store.list(PODS, limit=1)
    store.create(PODS, pod("d"), namespace="default")
    store.drop_history()
    with pytest.raises(Expired) as err:
        store.list(PODS, limit=1, continue_token=page.continue_token)
    assert err.value.code == 410


# ------------------------------------------------------------------ watch


async def take(watch: Any, n: int) -> list[WatchEvent]:
    out = []
    async with asyncio.timeout(2):
        async for event in watch:
            out.append(event)
            if len(out) == n:
                break
    return out


def kinds(events: list[WatchEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.object.get("metadata", {}).get("name", "")) for e in events]


async def test_watch_from_zero_lists_then_streams(store: Store) -> None:
    store.create(PODS, pod("a"), namespace="default")
    watch = store.watch(PODS, namespace="default", resource_version="0")
    store.create(PODS, pod("b"), namespace="default")
    store.remove(PODS, "default", "a")
    assert kinds(await take(watch, 3)) == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    watch.close()


async def test_watch_resume_replays_history(store: Store) -> None:
    created = store.create(PODS, pod("a"), namespace="default")
    rv = created["metadata"]["resourceVersion"]
    store.update(PODS, pod("a", labels={"x": "1"}), namespace="default", name="a")
    store.create(PODS, pod("b"), namespace="kube-system")
    watch = store.watch(PODS, resource_version=rv)
    events = await take(watch, 2)
    assert kinds(events) == [("MODIFIED", "a"), ("ADDED", "b")]
    assert int(events[1].object["metadata"]["resourceVersion"]) > int(
        events[0].object["metadata"]["resourceVersion"]
    )


async def test_watch_too_old_gets_410_then_ends(store: Store) -> None:
    store.history_limit = 2
    for name in "abcd":
        store.create(PODS, pod(name), namespace="default")
    watch = store.watch(PODS, resource_version="5")
    events = [e async for e in watch]
    assert len(events) == 1
    assert events[0].type == "ERROR"
    status = events[0].object
    assert status["code"] == 410
    assert status["reason"] == "Expired"
    assert status["message"] == f"too old resource version: 5 ({store.resource_version - 2})"


async def test_drop_history_forces_410(store: Store) -> None:
    rv = store.create(PODS, pod("a"), namespace="default")["metadata"]["resourceVersion"]
    store.create(PODS, pod("b"), namespace="default")
    store.drop_history()
    events = [e async for e in store.watch(PODS, resource_version=rv)]
    assert events[0].type == "ERROR"
    # resuming from now is fine
    watch = store.watch(PODS, resource_version=str(store.resource_version))
    store.create(PODS, pod("c"), namespace="default")
    assert kinds(await take(watch, 1)) == [("ADDED", "c")]


async def test_watch_selector_transitions(store: Store) -> None:
    watch = store.watch(
        PODS, label_selector="app=web", resource_version=str(store.resource_version)
    )
    store.create(PODS, pod("p"), namespace="default")
    store.update(PODS, pod("p", labels={"app": "web"}), namespace="default", name="p")
    store.update(PODS, pod("p", labels={"app": "web", "v": "2"}), namespace="default", name="p")
    store.update(PODS, pod("p", labels={"app": "db"}), namespace="default", name="p")
    events = await take(watch, 3)
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    deleted = events[2].object
    assert deleted["metadata"]["labels"] == {"app": "web", "v": "2"}  # last matching state
    assert deleted["metadata"]["resourceVersion"] == str(store.resource_version)


async def test_bookmarks(store: Store) -> None:
    store.bookmark_interval = 0.01
    watch = store.watch(PODS, resource_version=str(store.resource_version), allow_bookmarks=True)
    store.create(PODS, pod("a"), namespace="default")
    events = await take(watch, 2)
    assert events[0].type == "ADDED"
    assert events[1].type == "BOOKMARK"
    assert events[1].object == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(store.resource_version)},
    }


async def test_send_initial_events_ends_with_annotated_bookmark(store: Store) -> None:
    store.create(PODS, pod("a"), namespace="default")
    watch = store.watch(PODS, allow_bookmarks=True, send_initial_events=True)
    events = await take(watch, 2)
    assert events[0].type == "ADDED"
    assert events[1].object["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_close_ends_iteration(store: Store) -> None:
    watch = store.watch(PODS)
    watch.close()
    assert [e async for e in watch] == []
    assert store.close_watches() == 0


async def test_resume_across_reconnects_loses_nothing(store: Store) -> None:
    expected = [f"p{i}" for i in range(30)]
    seen: list[str] = []
    last_rv = str(store.resource_version)
    for batch in range(3):
        watch = store.watch(PODS, resource_version=last_rv)
        for name in expected[batch * 10 : batch * 10 + 10]:
            store.create(PODS, pod(name), namespace="default")
        for event in await take(watch, 7):
            seen.append(event.object["metadata"]["name"])
            last_rv = event.object["metadata"]["resourceVersion"]
        assert store.close_watches() == 1
    watch = store.watch(PODS, resource_version=last_rv)
    seen += [e.object["metadata"]["name"] for e in await take(watch, 9)]
    assert seen == expected


NAMESPACES = ResourceType(group="", version="v1", plural="namespaces", kind="Namespace",
                          namespaced=False, subresources=frozenset({"status"}))  # fmt: skip


def test_generic_status_write_resets_user_metadata(store: Store) -> None:
    created = store.create(
        NAMESPACES, {"metadata": {"name": "team", "labels": {"a": "1"}}}, namespace=None
    )
    body = {
        "metadata": {"name": "team", "labels": {"a": "2"}},
        "spec": {"x": 1},
        "status": {"phase": "Terminating"},
    }
    out = store.update(NAMESPACES, body, namespace=None, name="team", subresource="status")
    assert out["metadata"]["labels"] == {"a": "1"}
    assert out["status"] == {"phase": "Terminating"}
    assert "spec" not in out
    assert out["metadata"]["uid"] == created["metadata"]["uid"]


@pytest.mark.parametrize(
    ("name", "namespace_like", "ok"),
    [
        pytest.param("web-0", False, True, id="subdomain"),
        pytest.param("a.b.c", False, True, id="dotted-subdomain"),
        pytest.param("a.b", True, False, id="namespace-no-dots"),
        pytest.param("x" * 64, True, False, id="namespace-too-long"),
        pytest.param("UPPER", False, False, id="uppercase"),
    ],
)
def test_name_validation(store: Store, name: str, namespace_like: bool, ok: bool) -> None:
    rt = NAMESPACES if namespace_like else PODS
    namespace = None if namespace_like else "default"
    if ok:
        store.create(rt, {"metadata": {"name": name}}, namespace=namespace)
    else:
        with pytest.raises(Invalid) as err:
            store.create(rt, {"metadata": {"name": name}}, namespace=namespace)
        assert err.value.causes[0].field == "metadata.name"


def test_watch_refuses_a_resource_version_that_is_not_a_number(store: Store) -> None:
    from probemarker.sim.errors import ApiError

    with pytest.raises(ApiError) as err:
        store.watch(PODS, resource_version="abc")
    assert err.value.code == 400


async def test_watch_from_a_future_version_waits_for_newer_events(store: Store) -> None:
    # The watch cache accepts it and delivers only events newer than the version asked
    # for (cacheWatcher.process); a 504 comes only with sendInitialEvents=true.
    future = store.resource_version + 2
    watch = store.watch(PODS, resource_version=str(future))
    store.create(PODS, pod("a"), namespace="default")  # rv future-1: not delivered
    store.create(PODS, pod("b"), namespace="default")  # rv future: not delivered
    store.create(PODS, pod("c"), namespace="default")  # rv future+1: delivered
    async with asyncio.timeout(5):
        event = await anext(aiter(watch))
    assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "c")
    watch.close()


def test_status_writes_do_not_bump_generation(store: Store) -> None:
    created = store.create(PPM, marker("m"), namespace="default")
    body = dict(created, status={"observed": 1})
    out = store.update(PPM, body, namespace="default", name="m", subresource="status")
    assert out["metadata"]["generation"] == 1
    assert out["status"] == {"observed": 1}


def test_custom_resource_served_at_another_version(store: Store) -> None:
    store.create(PPM, marker("m"), namespace="default")
    v2 = ResourceType(group="probemarker.io", version="v1beta1", plural="podprobemarkers",
                      kind="PodProbeMarker", namespaced=True, is_custom=True)  # fmt: skip
    assert store.get(v2, "default", "m")["apiVersion"] == "probemarker.io/v1beta1"
    assert store.list(v2).items[0]["apiVersion"] == "probemarker.io/v1beta1"
    assert store.get(PPM, "default", "m")["apiVersion"] == "probemarker.io/v1alpha1"


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            {
                "status": {
                    "conditions": [{"type": "X", "status": "True", "reason": "", "message": ""}]
                }
            },
            {"status": {"conditions": [{"type": "X", "status": "True"}]}},
            id="condition-empty-reason-message-dropped",
        ),
        pytest.param(
            {"metadata": {"annotations": {"message": "", "a": "b"}}},
            {"metadata": {"annotations": {"message": "", "a": "b"}}},
            id="map-contents-kept",
        ),
        pytest.param(
            {"spec": {"hostNetwork": False, "containers": [{"name": "c", "ready": False}]}},
            {"spec": {"containers": [{"name": "c", "ready": False}]}},
            id="omitempty-bool-dropped-required-kept",
        ),
        pytest.param({"status": {}}, {"status": {}}, id="empty-struct-kept"),
    ],
)
def test_prune_empty_omitempty_fields(obj: dict[str, Any], expected: dict[str, Any]) -> None:
    assert prune_empty(obj) == expected


@pytest.mark.parametrize(
    ("change", "subresource", "field", "message"),
    [
        pytest.param(
            lambda o: o["metadata"].update(labels={"bad key": "v"}),
            None,
            "metadata.labels",
            'Invalid value: "bad key": name part must consist of alphanumeric characters',
            id="label-key",
        ),
        pytest.param(
            lambda o: o["metadata"].update(labels={"k": "bad value"}),
            "status",
            "metadata.labels",
            'Invalid value: "bad value": a valid label must be an empty string or consist',
            id="label-value-via-status",
        ),
        pytest.param(
            lambda o: o["metadata"].update(annotations={"a/b/c": "v"}),
            None,
            "metadata.annotations",
            'Invalid value: "a/b/c": a qualified name must consist',
            id="annotation-key",
        ),
        pytest.param(
            lambda o: o["metadata"].update(annotations={"big": "x" * 262145}),
            None,
            "metadata.annotations",
            "Too long: may not be more than 262144 bytes",
            id="annotations-too-big",
        ),
        pytest.param(
            lambda o: o["metadata"].update(annotations={"big": "é" * 131_072}),
            "status",
            "metadata.annotations",
            "Too long: may not be more than 262144 bytes",
            id="annotations-too-big-in-bytes-not-characters-via-status",
        ),
        pytest.param(
            lambda o: o["spec"].update(nodeName="node-b"),
            None,
            "spec",
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`",
            id="pod-spec-immutable",
        ),
        pytest.param(
            lambda o: o.update(status={"conditions": [{"type": "not valid!", "status": "True"}]}),
            "status",
            "status.conditions[0].Type",
            'Invalid value: "not valid!": name part must consist',
            id="pod-condition-type",
        ),
    ],
)
def test_write_validation(
    store: Store, change: Any, subresource: str | None, field: str, message: str
) -> None:
    current = store.create(PODS, pod("p"), namespace="default")
    change(current)
    with pytest.raises(Invalid) as err:
        store.update(PODS, current, namespace="default", name="p", subresource=subresource)
    cause = err.value.causes[0]
    assert cause.field == field
    assert cause.message.startswith(message)
    assert err.value.message.startswith(f'Pod "p" is invalid: {field}: {message}')


def test_allowed_pod_updates(store: Store) -> None:
    current = store.create(PODS, pod("p"), namespace="default")
    current["spec"]["containers"][0]["image"] = "nginx:2"
    current["spec"]["activeDeadlineSeconds"] = 5
    current["metadata"]["labels"] = {"example.com/ok": "yes"}
    out = store.update(PODS, current, namespace="default", name="p")
    assert out["spec"]["containers"][0]["image"] == "nginx:2"
    status = dict(out, status={"conditions": [{"type": "Ready", "status": "True"},
                                              {"type": "example.com/probe", "status": "False"}]})  # fmt: skip
    store.update(PODS, status, namespace="default", name="p", subresource="status")
