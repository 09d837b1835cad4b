"""`probemarker sim serve` (sim/cli.py): serves until SIGTERM, with a usable kubeconfig."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import aiohttp
import yaml


async def test_serve_writes_kubeconfig_and_stops_on_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "probemarker.sim.cli",
        "serve",
        "--port",
        "0",
        "--kubeconfig-out",
        str(kubeconfig),
        "--nodes",
        "a,b",
        "--token",
        "t0k",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(20):
            assert process.stdout is not None
            line = (await process.stdout.readline()).decode()
            assert "serving on http://127.0.0.1:" in line
            config = yaml.safe_load(kubeconfig.read_text())
            server = config["clusters"][0]["cluster"]["server"]
            headers = {"Authorization": "Bearer t0k"}
            async with (
                aiohttp.ClientSession(headers=headers) as session,
                session.get(server + "/api/v1/nodes") as response,
            ):
                nodes = await response.json()
            assert [n["metadata"]["name"] for n in nodes["items"]] == ["a", "b"]
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
