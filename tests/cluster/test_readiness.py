"""A readiness gate on a real kubelet: the marker's condition decides the pod's Ready,
and a Service's EndpointSlice marks the endpoint ready and not ready with it.

The kubelet computes Ready from the containers and `spec.readinessGates` (a gate's
condition must be True); the EndpointSlice controller then copies Ready into the
endpoint's `conditions.ready`. Both are Kubernetes' own code here, not the sim's.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.install import Addon, Cluster
from tests.cluster.kube import (
    busybox_pod,
    exec_in,
    marker,
    wait_for,
)
from tests.podfields import condition

pytestmark = pytest.mark.timeout(600)

GATE = "probemarker.test/gate"


def _endpoint_ready(cluster: Cluster, namespace: str) -> Any:
    slices = cluster.kubectl.json(
        "-n", namespace, "get", "endpointslices", "-l", "kubernetes.io/service-name=gate"
    )["items"]
    states = [
        e.get("conditions", {}).get("ready") for s in slices for e in s.get("endpoints") or []
    ]
    return states[0] if len(states) == 1 else states


def _follows(cluster: Cluster, namespace: str, ready: bool) -> None:
    kubectl = cluster.kubectl
    want = "True" if ready else "False"
    wait_for(
        lambda: kubectl.get("pod", "gate", namespace),
        lambda pod: (
            (condition(pod, GATE) or {}).get("status") == want
            and (condition(pod, "Ready") or {}).get("status") == want
        ),
        timeout=30,
        what=f"condition {GATE} and Ready {want}",
    )
    wait_for(
        lambda: _endpoint_ready(cluster, namespace),
        lambda state: state is ready,
        timeout=30,
        what=f"the EndpointSlice's endpoint ready={ready}",
    )


def test_the_gate_decides_ready_and_the_endpoint(
    cluster: Cluster, addon: Addon, namespace: str
) -> None:
    kubectl = cluster.kubectl
    pod = busybox_pod(
        "gate",
        namespace,
        script="touch /tmp/ok && exec sleep 2147483647",
        labels={"app": "gate"},
        spec={"readinessGates": [{"conditionType": GATE}]},
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "gate", "namespace": namespace},
        "spec": {"selector": {"app": "gate"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    probe = {"exec": {"command": ["cat", "/tmp/ok"]}}
    kubectl.apply(
        pod,
        service,
        marker("gate", namespace, app="gate", probe=probe, label=None, condition_type=GATE),
    )
    _follows(cluster, namespace, ready=True)
    exec_in(kubectl, namespace, "gate", "rm", "/tmp/ok")
    _follows(cluster, namespace, ready=False)
    exec_in(kubectl, namespace, "gate", "touch", "/tmp/ok")
    _follows(cluster, namespace, ready=True)
