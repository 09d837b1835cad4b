"""SIGTERM and SIGINT stop `probemarker run` at every stage, as a real process; and the
daemon finds its kubeconfig through --kubeconfig, PROBEMARKER_KUBECONFIG or KUBECONFIG.

Stages: getting credentials (an exec plugin that hangs), listing from a dead server
(connection refused; a server that accepts and never answers), waiting for a CRD that
is not installed, running. The first signal exits 0 within the grace period; a second
one exits at once (128 + the signal's number) with a line saying so. Each test waits
for the log line of the stage it means, never for a fixed time.
"""

from __future__ import annotations

import signal
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
import yaml

from probemarker.sim import SimCluster
from probemarker.sim.exec.runners import ExecReply, ExecRequest
from tests.integration.process import DaemonProcess, daemon
from tests.integration.world import NS, World, flag, marker
from tests.probe.servers import free_port


def kubeconfig_for(tmp_path: Path, server: str, user: dict[str, Any] | None = None) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": user or {}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@contextmanager
def silent_server() -> Iterator[int]:
    """A port whose connections are accepted by the kernel and never answered."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


async def _stops_cleanly(proc: DaemonProcess, signum: signal.Signals) -> None:
    proc.signal(signum)
    assert await proc.exit_code(within=10) == 0, proc.lines
    assert proc.events()[-1] == "daemon.stopped", proc.outline()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_signal_while_the_server_refuses_connections(
    tmp_path: Path, signum: signal.Signals
) -> None:
    server = f"http://127.0.0.1:{free_port('127.0.0.1')}"
    async with daemon(kubeconfig_for(tmp_path, server)) as proc:
        line = await proc.wait_event("informer.unreachable")
        assert line["message"].startswith(f"cannot reach the API server at {server}: ")
        await _stops_cleanly(proc, signum)
    # One line for both informers (at most one a minute), not one per informer and retry.
    assert proc.events().count("informer.unreachable") == 1


async def test_sigterm_while_a_list_hangs(tmp_path: Path) -> None:
    with silent_server() as port:
        config = kubeconfig_for(tmp_path, f"http://127.0.0.1:{port}")
        async with daemon(config) as proc:
            await proc.wait_event("daemon.starting")
            await _stops_cleanly(proc, signal.SIGTERM)


async def test_sigterm_while_the_credential_plugin_hangs(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text("import time\ntime.sleep(120)\n")
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    with silent_server() as port:
        config = kubeconfig_for(tmp_path, f"https://127.0.0.1:{port}", user)
        async with daemon(config) as proc:
            await proc.wait_event("credentials.exec_plugin_running")
            await _stops_cleanly(proc, signal.SIGTERM)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_signal_while_the_crd_is_missing(tmp_path: Path, signum: signal.Signals) -> None:
    async with SimCluster(node_names=("node-1",)) as sim, daemon(sim.kubeconfig_path) as proc:
        line = await proc.wait_event("informer.not_served")
        assert line["informer"] == "podprobemarkers"
        assert "namespace" not in line
        assert "the PodProbeMarker CRD is not installed" in line["message"]
        assert "kubectl apply -f manifests/crd/" in line["message"]
        await _stops_cleanly(proc, signum)


@pytest.mark.parametrize("variable", [None, "PROBEMARKER_KUBECONFIG", "KUBECONFIG"])
async def test_sigterm_when_running(world: World, variable: str | None) -> None:
    """Running, found through --kubeconfig, our variable or kubectl's (KUBECONFIG was
    not read: the daemon went for the in-cluster configuration)."""
    async with daemon(world.sim.kubeconfig_path, variable=variable) as proc:
        line = await proc.wait_event("daemon.ready")
        assert line["node"] == "node-1"
        await _stops_cleanly(proc, signal.SIGTERM)


async def test_the_process_answers_health_until_it_stops(tmp_path: Path) -> None:
    """/readyz names the missing CRD, /healthz stays 200 meanwhile; the port is gone
    after the stop."""
    async with SimCluster(node_names=("node-1",)) as sim, daemon(sim.kubeconfig_path) as proc:
        port = (await proc.wait_event("metrics.serving"))["port"]
        await proc.wait_event("informer.not_served")
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/readyz") as response:
                assert response.status == 503
                assert "the PodProbeMarker CRD is not installed" in await response.text()
            async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 200
        await _stops_cleanly(proc, signal.SIGTERM)
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("signum", "code"),
    [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, 128 + signal.SIGINT)],
    ids=["SIGTERM", "SIGINT"],
)
async def test_second_signal_exits_at_once(world: World, signum: signal.Signals, code: int) -> None:
    """A probe that never ends holds the graceful stop for its 60 s grace; a second
    signal ends the process at once, with a line."""
    started = anyio.Event()

    async def hang(_: ExecRequest) -> ExecReply:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    world.sim.exec_handlers.register(NS, "game-0", "app", hang)
    await world.core.create_namespaced_pod(
        NS,
        {
            "metadata": {"name": "game-0", "namespace": NS, "labels": {"app": "game"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "game:1"}]},
        },
    )
    await world.sim.kubelet.wait_running(NS, "game-0")
    await world.apply_marker(marker("hang", probes=[flag("hang", timeout=120, period=1)]))
    grace = ("--shutdown-grace-seconds", "60")
    async with daemon(world.sim.kubeconfig_path, *grace) as proc:
        with anyio.fail_after(20):
            await started.wait()
        proc.signal(signum)
        await proc.wait_event("daemon.stopping")
        proc.signal(signum)
        assert await proc.exit_code(within=5) == code
        last = proc.lines[-1]
        assert last["event"] == "daemon.stopped_at_once", proc.lines
        assert last["signal"] == signum.name
