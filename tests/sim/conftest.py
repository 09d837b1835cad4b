"""Fixtures for the simulated API server's tests: a running SimCluster and clients for it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client

from probemarker.sim import SimCluster


@pytest.fixture
async def sim() -> AsyncIterator[SimCluster]:
    async with SimCluster(node_names=("node-1", "node-2")) as cluster:
        yield cluster


@pytest.fixture
async def api(sim: SimCluster) -> AsyncIterator[client.ApiClient]:
    async with client.ApiClient(sim.configuration()) as api_client:
        yield api_client


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)
