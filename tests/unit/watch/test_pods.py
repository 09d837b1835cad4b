"""watch/pods.py: the engine's view of a pod reads odd input as empty, never raises."""

from __future__ import annotations

from typing import Any

import pytest

from probemarker.watch.pods import parse_time, pod_projection, pod_view


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param({}, id="empty"),
        pytest.param({"metadata": None, "spec": [], "status": "x"}, id="wrong-types"),
        pytest.param({"metadata": {"labels": {"a": 1}, "annotations": None}}, id="odd-maps"),
        pytest.param({"spec": {"containers": [None, {"name": 3}, {"ports": "x"}]}}, id="odd-list"),
        pytest.param(
            {"status": {"containerStatuses": [{"name": "a", "state": []}]}}, id="odd-state"
        ),
    ],
)
def test_odd_pods_read_as_empty(raw: dict[str, Any]) -> None:
    # A whole pod, and the daemon's projection of it (which must not raise either).
    for view in (pod_view(raw), pod_view(pod_projection(raw))):
        assert dict(view.labels) == {} or view.labels == {}
        assert view.uid == ""
        assert not view.deleting


def test_container_facts() -> None:
    view = pod_view(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "b"}},
            "spec": {
                "containers": [{"name": "app", "ports": [{"name": "http", "containerPort": 80}]}],
                "initContainers": [{"name": "side", "restartPolicy": "Always"}, {"name": "init"}],
            },
            "status": {
                "phase": "Running",
                "podIP": "10.0.0.1",
                "containerStatuses": [
                    {
                        "name": "app",
                        "containerID": "containerd://abc",
                        "restartCount": 2,
                        "started": True,
                        "state": {"running": {"startedAt": "2026-11-23T10:00:00Z"}},
                    }
                ],
                "initContainerStatuses": [
                    {"name": "side", "state": {"terminated": {"exitCode": 1}}, "containerID": "x"}
                ],
            },
        }
    )
    app, side = view.containers["app"], view.containers["side"]
    assert "init" not in view.containers
    assert (app.running, app.started, app.restart_count, app.container_id) == (
        True,
        True,
        2,
        "containerd://abc",
    )
    assert app.started_at == parse_time("2026-11-23T10:00:00Z")
    assert app.ports == {"http": 80}
    assert (side.running, side.container_id) == (False, "x")
    assert view.pod_ip == "10.0.0.1"
    assert view.active


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1970-01-01T00:01:00Z", 60.0, id="utc"),
        pytest.param("1970-01-01T01:01:00+01:00", 60.0, id="offset"),
        pytest.param("yesterday", None, id="garbage"),
        pytest.param(None, None, id="none"),
    ],
)
def test_parse_time(text: object, expected: float | None) -> None:
    assert parse_time(text) == expected
