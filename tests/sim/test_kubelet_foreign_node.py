"""A pod bound to a node the sim does not run: the kubelet logs why it stays Pending."""

from __future__ import annotations

import logging

import pytest
from kubernetes_asyncio import client

from probemarker.sim import SimCluster
from tests.sim.server_helpers import pod_manifest


async def test_pod_bound_to_a_foreign_node_is_logged_once(
    sim: SimCluster, core: client.CoreV1Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="probemarker.sim.kubelet.node")
    await core.create_namespaced_pod("default", pod_manifest("far", node="node-9"))
    await core.patch_namespaced_pod("far", "default", {"metadata": {"labels": {"a": "b"}}})
    await core.create_namespaced_pod("default", pod_manifest("unbound", node=None))
    await core.create_namespaced_pod("default", pod_manifest("near"))
    # The kubelet handles pod events in order: once `near` runs, it has seen the others.
    await sim.kubelet.wait_running("default", "near")
    assert [r.getMessage() for r in caplog.records] == [
        "pod default/far is bound to node node-9, which this sim does not run (its nodes: "
        "node-1,node-2), so it stays Pending: start the sim with --nodes node-1,node-2,node-9 "
        "(SimCluster(node_names=...) in tests), or set spec.nodeName to one of its nodes"
    ]
    assert caplog.records[0].levelno == logging.WARNING
    far = await core.read_namespaced_pod("far", "default")
    assert far.status.phase == "Pending"
