"""daemon/app.py wiring: the client's exec pool is sized by the probe cap (issue 15, 2) plus
the exec streams held past their deadline (issue 23)."""

from __future__ import annotations

import pytest

from probemarker.daemon.app import Daemon, engine_settings
from probemarker.daemon.assembly import client_settings
from probemarker.daemon.settings import RunSettings
from probemarker.kube.connect.client import ClientSettings, KubeClient
from probemarker.kube.connect.config import Connection

CONNECTION = Connection(server="http://127.0.0.1:1")


@pytest.mark.parametrize(
    ("runs", "held", "pool"),
    [
        pytest.param(200, 64, 264, id="default-held"),
        pytest.param(200, 0, 200, id="nothing-held"),
        pytest.param(1, 500, 501, id="many-held"),
    ],
)
def test_the_exec_pool_has_room_for_every_run_and_every_held_stream(
    runs: int, held: int, pool: int
) -> None:
    settings = RunSettings(node="n", max_concurrent_probes=runs, max_held_exec_streams=held)
    assert client_settings(settings).exec_connections == pool


def test_a_client_with_fewer_exec_connections_than_the_cap_is_refused() -> None:
    client = KubeClient(CONNECTION, settings=ClientSettings(exec_connections=32))
    # Refused before anything is built (nothing is left open).
    with pytest.raises(ValueError, match="32 exec connections for 64 probe runs"):
        Daemon(client, RunSettings(node="n", max_concurrent_probes=64))


def test_a_client_without_room_for_the_held_streams_is_refused() -> None:
    client = KubeClient(CONNECTION, settings=ClientSettings(exec_connections=64))
    with pytest.raises(ValueError, match="64 probe runs at once and 64 held exec streams"):
        Daemon(client, RunSettings(node="n", max_concurrent_probes=64))


@pytest.mark.parametrize("step", [0.25, 0.0, 0.5])
def test_the_probes_phase_step_reaches_the_engine_settings(step: float) -> None:
    # The daemon's own engine: tests/integration/test_slow_probes.py.
    settings = RunSettings(node="n", probe_phase_step_seconds=step, max_concurrent_probes=9)
    engine = engine_settings(settings)
    assert (engine.phase_step, engine.max_concurrent) == (step, 9)
