"""One builder for every API path the client layer uses (pure)."""

from __future__ import annotations

import pytest

from probemarker.kube.connect.errors import RequestInfo
from probemarker.kube.connect.resources import EVENTS, PODS, Resource

NODES = Resource("", "v1", "nodes", namespaced=False)
MARKERS = Resource("probemarker.io", "v1alpha1", "podprobemarkers")


@pytest.mark.parametrize(
    ("resource", "args", "path"),
    [
        pytest.param(PODS, (None,), "/api/v1/pods", id="pods-all-namespaces"),
        pytest.param(PODS, ("games",), "/api/v1/namespaces/games/pods", id="pods-one-namespace"),
        pytest.param(
            PODS, ("games", "gs-1", "exec"), "/api/v1/namespaces/games/pods/gs-1/exec", id="exec"
        ),
        pytest.param(
            PODS, ("games", "gs-1", "status"), "/api/v1/namespaces/games/pods/gs-1/status", id="status"
        ),
        pytest.param(
            EVENTS, ("games", "gs-1.1a2b"), "/apis/events.k8s.io/v1/namespaces/games/events/gs-1.1a2b", id="event"
        ),
        pytest.param(
            MARKERS, ("games",), "/apis/probemarker.io/v1alpha1/namespaces/games/podprobemarkers", id="group"
        ),
        pytest.param(NODES, ("ignored",), "/api/v1/nodes", id="cluster-scoped"),
        pytest.param(PODS, ("a/b", "c d"), "/api/v1/namespaces/a%2Fb/pods/c%20d", id="encoded"),
    ],
)  # fmt: skip
def test_paths(resource: Resource, args: tuple[str | None, ...], path: str) -> None:
    assert resource.path(*args) == path


def test_info_in_rbac_terms() -> None:
    assert PODS.info("patch", "games", "gs-1", "status") == RequestInfo(
        "patch", "pods", namespace="games", name="gs-1", subresource="status"
    )
    assert EVENTS.info("create", "games").full_resource == "events.events.k8s.io"
