"""Server-side Table output (what `kubectl get` prints)."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from probemarker.sim import SimCluster
from probemarker.sim.server.handlers.tables import human_duration, jsonpath_values
from tests.sim.server_helpers import pod_manifest, raw

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60, "3h1m"),
        (8 * 3600, "8h"),
        (48 * 3600, "2d"),
        (49 * 3600, "2d1h"),
        (9 * 86400, "9d"),
        (800 * 86400, "2y70d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_simple_jsonpath() -> None:
    obj = {"spec": {"probes": [{"name": "a"}, {"name": "b"}], "m": {"k.io/x": 1}}}
    assert jsonpath_values(obj, ".spec.probes[*].name") == ["a", "b"]
    assert jsonpath_values(obj, ".spec.probes[1].name") == ["b"]
    assert jsonpath_values(obj, ".spec.m['k.io/x']") == [1]
    assert jsonpath_values(obj, ".spec.missing") == []


async def test_pod_table(sim: SimCluster, core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(
        "default", pod_manifest("t", readinessGates=[{"conditionType": "x.io/gate"}])
    )
    await sim.kubelet.wait_running("default", "t")
    status, table = await raw(
        sim, "GET", "/api/v1/namespaces/default/pods", headers={"Accept": TABLE}
    )
    assert status == 200
    assert table["kind"] == "Table"
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names[:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    (row,) = table["rows"]
    cells = dict(zip(names, row["cells"], strict=True))
    assert (cells["Name"], cells["Ready"], cells["Status"]) == ("t", "1/1", "Running")
    assert cells["Readiness Gates"] == "0/1"
    assert row["object"]["kind"] == "PartialObjectMetadata"
    status, plain = await raw(sim, "GET", "/api/v1/namespaces/default/pods")
    assert plain["kind"] == "PodList"
