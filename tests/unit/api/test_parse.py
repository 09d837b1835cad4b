"""parse_marker: defaults, the typed model, and every error at once."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from probemarker.api.model import (
    ExecAction,
    GRPCAction,
    HTTPGetAction,
    MarkerRef,
    ProbeState,
    TCPSocketAction,
    Timing,
)
from probemarker.api.parse import InvalidMarker, parse_marker


def marker(**probe_overrides: Any) -> dict[str, Any]:
    probe: dict[str, Any] = {
        "name": "idle",
        "containerName": "main",
        "probe": {"exec": {"command": ["/bin/idle"]}},
        "markerPolicy": [{"state": "Succeeded", "labels": {"idle": "true"}}],
    }
    probe.update(probe_overrides)
    return {
        "apiVersion": "probemarker.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {"name": "m", "namespace": "ns", "uid": "u-1", "generation": 4},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "probes": [probe]},
    }


def test_kubelet_defaults_are_applied() -> None:
    parsed = parse_marker(marker())
    assert parsed.ref == MarkerRef("ns", "m")
    assert parsed.uid == "u-1"
    assert parsed.generation == 4
    assert parsed.probes[0].timing == Timing(0, 1, 10, 1, 3)


def test_explicit_timing_is_kept() -> None:
    spec = {
        "exec": {"command": ["x"]},
        "initialDelaySeconds": 5,
        "timeoutSeconds": 2,
        "periodSeconds": 7,
        "successThreshold": 2,
        "failureThreshold": 4,
    }
    assert parse_marker(marker(probe=spec)).probes[0].timing == Timing(5, 2, 7, 2, 4)


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        pytest.param({"exec": {"command": ["a", "b"]}}, ExecAction(("a", "b")), id="exec"),
        pytest.param({"httpGet": {"port": "http"}}, HTTPGetAction(port="http"), id="http-defaults"),
        pytest.param({"tcpSocket": {"port": 80}}, TCPSocketAction(port=80), id="tcp"),
        pytest.param({"grpc": {"port": 9090}}, GRPCAction(port=9090), id="grpc"),
        pytest.param(
            {"grpc": {"port": 9090, "service": "db"}}, GRPCAction(9090, "db"), id="grpc-service"
        ),
    ],
)
def test_handlers(handler: dict[str, Any], expected: object) -> None:
    assert parse_marker(marker(probe=handler)).probes[0].handler == expected


def test_policies_and_condition() -> None:
    parsed = parse_marker(
        marker(
            markerPolicy=[
                {"state": "Failed", "annotations": {"a/b": "1"}},
                {"state": "Succeeded", "labels": {"x": "y"}},
            ],
            podConditionType="example.com/Idle",
        )
    )
    probe = parsed.probes[0]
    assert probe.condition_type == "example.com/Idle"
    failed = probe.policy_for(ProbeState.FAILED)
    assert failed is not None
    assert dict(failed.annotations) == {"a/b": "1"}
    succeeded = probe.policy_for(ProbeState.SUCCEEDED)
    assert succeeded is not None
    assert dict(succeeded.labels) == {"x": "y"}


def test_model_is_immutable_and_detached_from_input() -> None:
    doc = marker()
    parsed = parse_marker(doc)
    doc["spec"]["probes"][0]["markerPolicy"][0]["labels"]["idle"] = "changed"
    policy = parsed.probes[0].policies[0]
    assert policy.labels["idle"] == "true"
    with pytest.raises(TypeError):
        policy.labels["idle"] = "x"  # type: ignore[index]


def test_every_error_is_reported_at_once() -> None:
    doc = marker(name="", containerName="Not_A_Label", probe={"periodSeconds": 0})
    with pytest.raises(InvalidMarker) as caught:
        parse_marker(doc)
    paths = [e.path for e in caught.value.errors]
    assert paths == [
        "spec.probes[0].name",
        "spec.probes[0].containerName",
        "spec.probes[0].probe",
        "spec.probes[0].probe.periodSeconds",
    ]
    assert "PodProbeMarker ns/m is invalid" in str(caught.value)


def test_input_is_not_modified() -> None:
    doc = marker()
    before = copy.deepcopy(doc)
    parse_marker(doc)
    assert doc == before
