"""The simulated kubelet's runtime records: pod IPs, new containers, per-pod state.

Helpers for `node.py`: `pod_ip_for` hands out 127.0.0.0/8 addresses,
`new_container` creates a `ContainerState` as a runtime starts one (a fresh
`containerd://` ID; probe results empty, so started/ready only without the
corresponding probe), `PodState` is what the kubelet remembers of a pod.
"""

from __future__ import annotations

import asyncio
import secrets
from datetime import datetime
from typing import Any

from probemarker.sim.kubelet.podstatus import ContainerState, PodRuntime

__all__ = ["PodState", "new_container", "pod_ip_for", "restartable", "rfc3339"]


def rfc3339(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_ip_for(index: int) -> str:
    """The index-th pod IP: 127.0.1.1, 127.0.1.2, ... (skipping .0 and .255)."""
    per_second = 255 * 254
    second, rest = divmod(index, per_second)
    return f"127.{second}.{1 + rest // 254}.{1 + rest % 254}"


def restartable(container: dict[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


def new_container(spec: dict[str, Any], now: str, *, restart_count: int = 0) -> ContainerState:
    """A freshly started container: probe results start empty (keyed by container ID),
    so it is started only without a startupProbe and ready only without a readinessProbe."""
    return ContainerState(
        name=spec["name"],
        image=spec.get("image", ""),
        container_id=f"containerd://{secrets.token_hex(32)}",
        started_at=now,
        restart_count=restart_count,
        ready=not spec.get("readinessProbe"),
        startup_passed=not spec.get("startupProbe"),
        volume_mounts=tuple(spec.get("volumeMounts") or ()),
    )


class PodState:
    """The kubelet's mutable record of one pod it runs."""

    def __init__(
        self,
        runtime: PodRuntime,
        containers: list[ContainerState],
        init_containers: list[ContainerState],
    ) -> None:
        self.runtime = runtime
        self.containers = containers
        self.init_containers = init_containers
        self.terminating = False
        self.deadline: str | None = None
        self.deletion_timer: asyncio.TimerHandle | None = None
