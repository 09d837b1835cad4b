"""Helpers shared by the sim server tests: pod manifests and raw HTTP requests."""

from __future__ import annotations

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
