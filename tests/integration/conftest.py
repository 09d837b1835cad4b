"""Fixtures for the daemon's integration tests: a sim with the CRD, a stock client, a
script for the containers' answers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client

from probemarker.sim import SimCluster
from tests.integration.world import Script, World


@pytest.fixture
async def world() -> AsyncIterator[World]:
    async with SimCluster(node_names=("node-1",)) as sim:
        sim.kubelet.auto_finish_deletion = True
        async with client.ApiClient(sim.configuration()) as api:
            w = World(sim, api, Script())
            await w.install_crd()
            yield w
