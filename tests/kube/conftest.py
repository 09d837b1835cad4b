"""Fixtures for the client layer's tests: a running sim and a `KubeClient` for it.

`sim` serves plain HTTP without auth; `tls_sim` serves HTTPS and requires a bearer
token, so the TLS and credential paths of the client are exercised too. `client`
and `tls_client` are `KubeClient`s built from each sim's kubeconfig, as the daemon
builds its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import load_kubeconfig
from probemarker.sim import SimCluster

TOKEN = "sim-token-1"


@pytest.fixture
async def sim() -> AsyncIterator[SimCluster]:
    async with SimCluster(node_names=("node-1",)) as cluster:
        yield cluster


@pytest.fixture
async def tls_sim() -> AsyncIterator[SimCluster]:
    async with SimCluster(https=True, token=TOKEN, node_names=("node-1",)) as cluster:
        yield cluster


@pytest.fixture
async def client(sim: SimCluster) -> AsyncIterator[KubeClient]:
    async with KubeClient(await load_kubeconfig(sim.kubeconfig_path)) as kube:
        yield kube


@pytest.fixture
async def tls_client(tls_sim: SimCluster) -> AsyncIterator[KubeClient]:
    async with KubeClient(await load_kubeconfig(tls_sim.kubeconfig_path)) as kube:
        yield kube
