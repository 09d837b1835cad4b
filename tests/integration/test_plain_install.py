"""The daemon as `pip install probemarker` leaves it (no extra: no kubernetes_asyncio, no
cel-python, no grpcio), as a real process against the sim: it labels a pod from an exec
probe, serves /metrics, and stops on SIGTERM (exit 0). The child can import only the
base dependencies (tests/plain_install.py); the sim runs in this process, with them."""

from __future__ import annotations

import asyncio
import os
import signal

import aiohttp

from tests import plain_install
from tests.integration.process import DaemonProcess
from tests.integration.world import World, flag, labels_of, marker


async def test_the_daemon_runs_with_the_base_dependencies_alone(world: World) -> None:
    await world.create_pod("game-0", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("answer")]))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KUBECONFIG", "NODE_NAME", "KUBERNETES_SERVICE_HOST")
        and not k.startswith("PROBEMARKER_")
    }
    env["PROBEMARKER_METRICS_ADDRESS"] = "127.0.0.1:0"
    process = await asyncio.create_subprocess_exec(
        *plain_install.command(
            "run",
            "--kubeconfig",
            str(world.sim.kubeconfig_path),
            "--node",
            "node-1",
            "--log-format",
            "json",
        ),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=plain_install.environment(env),
    )
    proc = DaemonProcess(process)
    try:
        port = (await proc.wait_event("metrics.serving"))["port"]
        await world.wait_pod("game-0", lambda pod: labels_of(pod).get("answer") == "yes")
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            assert response.status == 200
            assert "probemarker_" in await response.text()
        proc.signal(signal.SIGTERM)
        assert await proc.exit_code(within=15) == 0, proc.lines
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert "daemon.stopped" in proc.events()
