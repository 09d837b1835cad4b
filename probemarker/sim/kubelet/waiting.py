"""Waiting for a pod's stored state: the simulated kubelet's `wait_*` test helpers.

`PodWaits` is a mixin for `Kubelet`: it reads the pod from `_store` and sleeps on
`_changed`, an event the kubelet sets after handling every pod watch event, so
a wait re-checks exactly when some pod changed.  Each wait is bounded by `within`
seconds (TimeoutError after).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from probemarker.sim.errors import ApiError
from probemarker.sim.server.discovery.catalog import PODS
from probemarker.sim.store.objects import Store

__all__ = ["PodWaits"]


class PodWaits:
    """See the module docstring."""

    _store: Store
    _changed: asyncio.Event

    async def wait_for_pod(
        self,
        namespace: str,
        name: str,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        within: float = 5.0,
    ) -> dict[str, Any]:
        """Wait until the stored pod satisfies `predicate`; returns it."""
        async with asyncio.timeout(within):
            while True:
                with contextlib.suppress(ApiError):
                    pod = self._store.get(PODS, namespace, name)
                    if predicate(pod):
                        return pod
                self._changed.clear()
                await self._changed.wait()

    async def wait_removed(self, namespace: str, name: str, *, within: float = 5.0) -> None:
        """Wait until the pod is gone from the store."""
        async with asyncio.timeout(within):
            while True:
                try:
                    self._store.get(PODS, namespace, name)
                except ApiError:
                    return
                self._changed.clear()
                await self._changed.wait()

    async def wait_running(
        self, namespace: str, name: str, *, within: float = 5.0
    ) -> dict[str, Any]:
        return await self.wait_for_pod(
            namespace,
            name,
            lambda p: (p.get("status") or {}).get("phase") == "Running",
            within=within,
        )
