"""Helpers shared by the sim server tests: pod manifests and raw HTTP requests."""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from probemarker.sim import SimCluster


def pod_manifest(
    name: str, *, labels: dict[str, str] | None = None, node: str | None = "node-1", **spec: Any
) -> dict[str, Any]:
    """A one-container pod, bound to `node` (None: unscheduled, the kubelet leaves it Pending)."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}], **spec},
    }
    if node:
        body["spec"]["nodeName"] = node
    return body


async def raw(sim: SimCluster, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
    """One plain HTTP request to the sim: (status code, decoded JSON body)."""
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, sim.url + path, **kwargs) as response,
    ):
        return response.status, await response.json(content_type=None)


KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
HAVE_KUBECTL = os.access(KUBECTL, os.X_OK)


@dataclass(frozen=True, slots=True)
class Result:
    """What one kubectl run gave."""

    code: int
    out: str
    err: str


async def run_kubectl(
    kubeconfig: Path,
    *args: str,
    cache_dir: Path | None = None,
    stdin: str | None = None,
    within: float = 30,
) -> Result:
    """Run kubectl against a sim's kubeconfig; killed if it outlives `within` seconds."""
    cache = ("--cache-dir", str(cache_dir)) if cache_dir is not None else ()
    process = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        *cache,
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(within):
            out, err = await process.communicate(stdin.encode() if stdin is not None else None)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return Result(process.returncode, out.decode(), err.decode())
