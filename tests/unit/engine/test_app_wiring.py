"""app.py wiring: the client's exec pool is sized by the probe cap (issue 15, 2)."""

from __future__ import annotations

import pytest

from probemarker.app import Daemon, client_settings
from probemarker.kube.client import ClientSettings, KubeClient
from probemarker.kube.config import Connection
from probemarker.settings import RunSettings

CONNECTION = Connection(server="http://127.0.0.1:1")


def test_the_exec_pool_is_sized_by_the_probe_cap() -> None:
    settings = RunSettings(node="n", max_concurrent_probes=200)
    assert client_settings(settings).exec_connections == 200


def test_a_client_with_fewer_exec_connections_than_the_cap_is_refused() -> None:
    client = KubeClient(CONNECTION, settings=ClientSettings(exec_connections=32))
    # Refused before anything is built (nothing is left open).
    with pytest.raises(ValueError, match="32 exec connections for 64 probe runs"):
        Daemon(client, RunSettings(node="n", max_concurrent_probes=64))
