"""JSON patch, merge patch and strategic merge patch behave as kube-apiserver's."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from probemarker.sim.errors import ApiError, BadRequest, PatchFailed
from probemarker.sim.store.patch import (
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-0", "labels": {"app": "web"}, "finalizers": ["a"]},
    "spec": {
        "containers": [
            {"name": "app", "image": "nginx", "env": [{"name": "A", "value": "1"}],
             "ports": [{"containerPort": 80}]},
            {"name": "side", "image": "busybox"},
        ],
        "tolerations": [{"key": "k", "operator": "Exists"}],
    },
    "status": {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "PodScheduled", "status": "True"},
        ],
        "containerStatuses": [{"name": "app", "ready": True}, {"name": "side", "ready": True}],
    },
}  # fmt: skip
BARE_POD: dict[str, Any] = {"metadata": {"name": "p"}, "status": {"phase": "Pending"}}


@pytest.mark.parametrize(
    ("doc", "ops", "path", "expected"),
    [
        pytest.param(POD, [{"op": "add", "path": "/metadata/labels/x", "value": "1"}], ("metadata", "labels", "x"), "1", id="add-member"),
        pytest.param(POD, [{"op": "add", "path": "/status/conditions/-", "value": {"type": "X"}}], ("status", "conditions", 2, "type"), "X", id="append"),
        pytest.param(POD, [{"op": "add", "path": "/status/conditions/0", "value": {"type": "X"}}], ("status", "conditions", 0, "type"), "X", id="insert"),
        pytest.param(POD, [{"op": "replace", "path": "/status/phase", "value": "Failed"}], ("status", "phase"), "Failed", id="replace"),
        pytest.param(POD, [{"op": "remove", "path": "/status/conditions/-1"}], ("status", "conditions", -1, "type"), "Ready", id="remove-negative-index"),
        pytest.param(POD, [{"op": "copy", "from": "/metadata/labels/app", "path": "/metadata/labels/b"}], ("metadata", "labels", "b"), "web", id="copy"),
        pytest.param(POD, [{"op": "move", "from": "/metadata/labels/app", "path": "/metadata/labels/b"}], ("metadata", "labels", "b"), "web", id="move"),
        pytest.param(POD, [{"op": "test", "path": "/status/conditions/0/type", "value": "Ready"},
                           {"op": "replace", "path": "/status/conditions/0/status", "value": "False"}],
                     ("status", "conditions", 0, "status"), "False", id="test-then-replace"),
        pytest.param(POD, [{"op": "test", "path": "/metadata/labels/absent", "value": None},
                           {"op": "add", "path": "/metadata/labels/absent", "value": "v"}],
                     ("metadata", "labels", "absent"), "v", id="test-missing-equals-null"),
        pytest.param(POD, [{"op": "add", "path": "/metadata/labels/a~1b", "value": "1"}], ("metadata", "labels", "a/b"), "1", id="escaped-slash"),
    ],
)  # fmt: skip
def test_json_patch_applies(
    doc: dict[str, Any], ops: list[Any], path: tuple[Any, ...], expected: Any
) -> None:
    before = copy.deepcopy(doc)
    out: Any = apply_json_patch(doc, ops)
    for part in path:
        out = out[part]
    assert out == expected
    assert doc == before  # inputs never mutated


@pytest.mark.parametrize(
    "ops",
    [
        pytest.param(
            [{"op": "add", "path": "/status/conditions/-", "value": {"type": "X"}}],
            id="append-to-absent-list",
        ),
        pytest.param(
            [{"op": "add", "path": "/metadata/annotations/a", "value": "1"}],
            id="add-under-absent-map",
        ),
        pytest.param(
            [{"op": "test", "path": "/status/phase", "value": "Running"}], id="test-fails"
        ),
        pytest.param(
            [{"op": "test", "path": "/status/phase", "value": None}], id="test-null-vs-value"
        ),
        pytest.param(
            [{"op": "replace", "path": "/status/reason", "value": "x"}], id="replace-missing"
        ),
        pytest.param([{"op": "remove", "path": "/metadata/labels"}], id="remove-missing"),
        pytest.param([{"op": "add", "path": "/status/x/5", "value": 1}], id="deep-missing"),
        pytest.param([{"op": "frobnicate", "path": "/a"}], id="unknown-op"),
        pytest.param([{"op": "add", "path": "", "value": {}}], id="root-path"),
    ],
)
def test_json_patch_failures_are_422(ops: list[Any]) -> None:
    with pytest.raises(PatchFailed) as err:
        apply_json_patch(BARE_POD, ops)
    status = err.value.to_status()
    assert status["code"] == 422
    assert status["reason"] == "Invalid"
    assert status["message"] == "the server rejected our request due to an error in our request"


def test_json_patch_failed_test_is_atomic() -> None:
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}},
           {"op": "test", "path": "/status/phase", "value": "Running"}]  # fmt: skip
    with pytest.raises(PatchFailed):
        apply_json_patch(BARE_POD, ops)
    assert "labels" not in BARE_POD["metadata"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(True, False, id="bool-is-not-int"),
        pytest.param(1.0, False, id="float-is-not-int"),
        pytest.param(1, True, id="same-int"),
    ],
)
def test_json_patch_test_compares_types(value: Any, expected: bool) -> None:
    doc = {"a": 1}
    ops = [{"op": "test", "path": "/a", "value": value}]
    if expected:
        assert apply_json_patch(doc, ops) == doc
    else:
        with pytest.raises(PatchFailed):
            apply_json_patch(doc, ops)


@pytest.mark.parametrize(
    "body",
    [pytest.param({"op": "add"}, id="object"), pytest.param(["x"], id="list-of-strings")],
)
def test_json_patch_malformed_body_is_400(body: Any) -> None:
    with pytest.raises(BadRequest):
        apply_json_patch(BARE_POD, body)


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        pytest.param(
            {"metadata": {"labels": {"app": None, "b": "2"}}}, {"b": "2"}, id="null-deletes"
        ),
        pytest.param({"metadata": {"labels": {"c": "3"}}}, {"app": "web", "c": "3"}, id="merge"),
        pytest.param({"metadata": {"labels": None}}, None, id="delete-map"),
    ],
)
def test_merge_patch(patch: dict[str, Any], expected: Any) -> None:
    out = apply_merge_patch(POD, patch)
    assert out["metadata"].get("labels") == expected
    assert POD["metadata"]["labels"] == {"app": "web"}


def test_merge_patch_replaces_lists() -> None:
    out = apply_merge_patch(POD, {"status": {"conditions": [{"type": "X"}]}})
    assert out["status"]["conditions"] == [{"type": "X"}]


def _smp(patch: dict[str, Any]) -> dict[str, Any]:
    return apply_strategic_merge_patch(POD, patch, kind="Pod")


@pytest.mark.parametrize(
    ("patch", "check"),
    [
        pytest.param({"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                     lambda o: o["status"]["conditions"] == [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}],
                     id="conditions-merge-by-type"),
        pytest.param({"status": {"conditions": [{"type": "Custom", "status": "True"}]}},
                     lambda o: [c["type"] for c in o["status"]["conditions"]] == ["Ready", "PodScheduled", "Custom"],
                     id="conditions-append"),
        pytest.param({"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}},
                     lambda o: [c["type"] for c in o["status"]["conditions"]] == ["PodScheduled"],
                     id="delete-directive"),
        pytest.param({"status": {"$setElementOrder/conditions": [{"type": "PodScheduled"}, {"type": "Ready"}],
                                 "conditions": [{"type": "Ready", "status": "False"}]}},
                     lambda o: [c["type"] for c in o["status"]["conditions"]] == ["PodScheduled", "Ready"],
                     id="set-element-order"),
        pytest.param({"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}},
                     lambda o: [c.get("image") for c in o["spec"]["containers"]] == ["nginx:2", "busybox"],
                     id="containers-by-name"),
        pytest.param({"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "2"}]}]}},
                     lambda o: [e["name"] for e in o["spec"]["containers"][0]["env"]] == ["A", "B"],
                     id="env-by-name"),
        pytest.param({"spec": {"tolerations": [{"key": "other"}]}},
                     lambda o: o["spec"]["tolerations"] == [{"key": "other"}],
                     id="atomic-list-replaced"),
        pytest.param({"status": {"containerStatuses": [{"name": "app", "ready": False}]}},
                     lambda o: o["status"]["containerStatuses"] == [{"name": "app", "ready": False}],
                     id="container-statuses-replaced-as-in-core-v1"),
        pytest.param({"metadata": {"finalizers": ["b", "a"]}},
                     lambda o: o["metadata"]["finalizers"] == ["a", "b"],
                     id="primitive-merge-list-union"),
        pytest.param({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}},
                     lambda o: "finalizers" not in o["metadata"] or o["metadata"]["finalizers"] == [],
                     id="delete-from-primitive-list"),
        pytest.param({"metadata": {"labels": {"$patch": "replace", "new": "1"}}},
                     lambda o: o["metadata"]["labels"] == {"new": "1"},
                     id="map-replace-directive"),
        pytest.param({"status": {"conditions": [{"$patch": "replace"}, {"type": "Only", "status": "True"}]}},
                     lambda o: o["status"]["conditions"] == [{"type": "Only", "status": "True"}],
                     id="list-replace-directive"),
        pytest.param({"metadata": {"labels": {"app": None}}},
                     lambda o: o["metadata"]["labels"] == {},
                     id="null-deletes-key"),
    ],
)  # fmt: skip
def test_strategic_merge_patch(patch: dict[str, Any], check: Any) -> None:
    before = copy.deepcopy(POD)
    assert check(_smp(patch))
    assert before == POD


def test_strategic_merge_missing_merge_key_is_refused() -> None:
    with pytest.raises(ApiError) as err:
        _smp({"spec": {"containers": [{"image": "httpd"}]}})
    assert err.value.message == "map: map[image:httpd] does not contain declared merge key: name"


def test_strategic_merge_retain_keys() -> None:
    doc = {"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}
    patch = {
        "spec": {
            "volumes": [
                {"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/x"}}
            ]
        }
    }
    out = apply_strategic_merge_patch(doc, patch, kind="Pod")
    assert out["spec"]["volumes"] == [{"name": "v", "hostPath": {"path": "/x"}}]


def test_strategic_merge_other_kinds_replace_lists() -> None:
    doc = {"spec": {"items": [1, 2]}, "metadata": {"name": "x"}}
    out = apply_strategic_merge_patch(doc, {"spec": {"items": [3]}}, kind="Widget")
    assert out["spec"]["items"] == [3]
