"""The informer's pure parts: projections, watch line parsing, backoff arithmetic."""

from __future__ import annotations

import itertools
import random
from typing import Any

import orjson
import pytest

from probemarker.kit.backoff import Backoff, BackoffSettings, backoff_delay
from probemarker.kit.projection import compile_fields, project, projector
from probemarker.kube.connect.errors import (
    ApiGone,
    ApiMalformed,
    ApiServerError,
    ApiTooManyRequests,
    RequestInfo,
)
from probemarker.kube.watch.watchevents import (
    BookmarkEvent,
    ErrorEvent,
    ObjectEvent,
    parse_watch_line,
)
from probemarker.watch.pods import pod_projection

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "42",
        "labels": {"app": "a"},
        "managedFields": [{"manager": "kubectl"}],
    },
    "spec": {
        "nodeName": "node-1",
        "containers": [
            {"name": "app", "image": "x", "ports": [{"containerPort": 80, "name": "http"}]},
            {"name": "side", "image": "y", "env": [{"name": "A", "value": "1"}]},
        ],
        "volumes": [{"name": "v"}],
    },
    "status": {"phase": "Running", "podIP": "10.0.0.1", "hostIP": "1.2.3.4"},
}


# -- projections ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        pytest.param(
            [], {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}}, id="identity-only"
        ),
        pytest.param(
            ["metadata.labels", "status.phase"],
            {
                "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "labels": {"app": "a"}},
                "status": {"phase": "Running"},
            },
            id="fields",
        ),
        pytest.param(
            ["spec.containers[].name", "spec.containers[].ports"],
            {
                "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
                "spec": {
                    "containers": [
                        {"name": "app", "ports": [{"containerPort": 80, "name": "http"}]},
                        {"name": "side"},
                    ]
                },
            },
            id="list-elements",
        ),
        pytest.param(
            ["metadata", "metadata.labels"], {"metadata": POD["metadata"]}, id="wider-path-wins"
        ),
        pytest.param(
            ["status.missing", "spec.initContainers[].name"],
            {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}},
            id="missing-left-out",
        ),
    ],
)
def test_projection(paths: list[str], expected: dict[str, Any]) -> None:
    assert project(POD, compile_fields(paths)) == expected


def test_pod_projection_keeps_what_the_engine_reads_and_not_the_rest() -> None:
    projected = pod_projection(POD)
    assert "resourceVersion" not in projected["metadata"]
    assert "managedFields" not in projected["metadata"]
    assert "volumes" not in projected["spec"]
    assert projected["spec"]["containers"][1] == {"name": "side"}
    assert projected["status"] == {"phase": "Running", "podIP": "10.0.0.1"}


@pytest.mark.parametrize("path", ["", ".a", "a.", "a..b", "a[].b[]", "a[x].b", "[].a"], ids=repr)
def test_invalid_paths(path: str) -> None:
    with pytest.raises(ValueError, match="path"):
        compile_fields([path])


def test_a_name_used_as_list_and_object_is_refused() -> None:
    with pytest.raises(ValueError, match="both as a list"):
        projector(["spec.containers[].name", "spec.containers.name"])


def test_projection_of_a_wrongly_shaped_value_leaves_it_out() -> None:
    shaped = {"metadata": {"name": "p"}, "spec": {"containers": {"not": "a list"}}, "status": 3}
    assert projector(["spec.containers[].name", "status.phase"])(shaped) == {
        "metadata": {"name": "p"}
    }


# -- watch lines ---------------------------------------------------------------------

INFO = RequestInfo(verb="watch", resource="pods", namespace="ns")


def _line(doc: object) -> bytes:
    return orjson.dumps(doc)


def test_object_events() -> None:
    for kind in ("ADDED", "MODIFIED", "DELETED"):
        event = parse_watch_line(_line({"type": kind, "object": POD}))
        assert event == ObjectEvent(kind, POD)  # type: ignore[arg-type]


def test_bookmark() -> None:
    line = _line(
        {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "77"}}}
    )
    assert parse_watch_line(line) == BookmarkEvent("77")


@pytest.mark.parametrize(
    ("status", "error"),
    [
        pytest.param(
            {
                "kind": "Status",
                "code": 410,
                "reason": "Expired",
                "message": "too old resource version: 1 (5)",
            },
            ApiGone,
            id="expired",
        ),
        pytest.param(
            {"kind": "Status", "reason": "Gone", "message": "old"}, ApiGone, id="gone-no-code"
        ),
        pytest.param(
            {"kind": "Status", "code": 500, "reason": "InternalError", "message": "boom"},
            ApiServerError,
            id="internal",
        ),
        pytest.param({"kind": "Status", "message": "?"}, ApiServerError, id="no-code-no-reason"),
        pytest.param(
            {
                "kind": "Status",
                "code": 429,
                "reason": "TooManyRequests",
                "message": "slow down",
                "details": {"retryAfterSeconds": 3},
            },
            ApiTooManyRequests,
            id="throttled",
        ),
    ],
)
def test_error_events(status: dict[str, Any], error: type[Exception]) -> None:
    event = parse_watch_line(_line({"type": "ERROR", "object": status}), request=INFO)
    assert isinstance(event, ErrorEvent)
    assert type(event.error) is error
    assert event.error.request == INFO
    assert event.error.message == status["message"]
    if error is ApiTooManyRequests:
        assert event.error.retry_after == 3


@pytest.mark.parametrize(
    "line",
    [
        b"{not json",
        b"[1, 2]",
        b'{"type": "ADDED"}',
        b'{"type": "ADDED", "object": {"metadata": {}}}',
        b'{"type": "BOOKMARK", "object": {"metadata": {}}}',
        b'{"type": "SOMETHING", "object": {}}',
    ],
    ids=["not-json", "not-object", "no-object", "no-name", "bookmark-no-rv", "unknown-type"],
)
def test_malformed_lines(line: bytes) -> None:
    with pytest.raises(ApiMalformed) as caught:
        parse_watch_line(line, request=INFO)
    assert caught.value.request == INFO


# -- backoff -------------------------------------------------------------------------

SETTINGS = BackoffSettings(initial=1.0, maximum=10.0, factor=2.0, jitter=0.5)


@pytest.mark.parametrize(
    ("failures", "rand", "delay"),
    [
        pytest.param(0, 0.0, 0.0, id="no-failure"),
        pytest.param(1, 0.0, 1.0, id="first"),
        pytest.param(2, 0.0, 2.0, id="doubles"),
        pytest.param(3, 0.99, 4.0 * 1.495, id="jitter-adds-up-to-half"),
        pytest.param(4, 0.5, 10.0, id="jitter-then-cap"),
        pytest.param(50, 0.0, 10.0, id="capped"),
        pytest.param(10_000, 0.99, 10.0, id="no-overflow"),
    ],
)
def test_backoff_delay(failures: int, rand: float, delay: float) -> None:
    assert backoff_delay(failures, settings=SETTINGS, rand=rand) == pytest.approx(delay)


def test_backoff_counts_resets_and_honours_a_floor() -> None:
    backoff = Backoff(SETTINGS, rng=random.Random(1))
    delays = [backoff.next_delay() for _ in range(6)]
    assert all(a <= b or b == 10.0 for a, b in itertools.pairwise(delays))
    assert max(delays) <= 10.0
    assert backoff.failures == 6
    backoff.reset()
    assert 1.0 <= backoff.next_delay() <= 1.5
    assert backoff.next_delay(at_least=30.0) == 30.0  # a Retry-After beyond the cap


@pytest.mark.parametrize(
    "kwargs",
    [{"initial": 0}, {"initial": 5, "maximum": 1}, {"factor": 0.5}, {"jitter": -1}],
    ids=["zero-initial", "max-below-initial", "shrinking", "negative-jitter"],
)
def test_backoff_settings_are_checked(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff"):
        BackoffSettings(**kwargs)
