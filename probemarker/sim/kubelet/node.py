"""The simulated kubelet: runs pods bound to the sim's nodes, on paper.

`Kubelet.run()` watches all pods in the store.  A pod whose `spec.nodeName`
is one of the kubelet's nodes is "started": it gets a pod IP from
127.0.0.0/8 (unique while the kubelet lives; tests can listen on it),
container IDs `containerd://<64 hex>`, running states, and the conditions a
kubelet sets (`podstatus.py`).  Every change of a pod's conditions (e.g. a
readiness gate's condition written by someone else) makes it recompute
Ready, as the kubelet's status manager does.  A pod with a
deletionTimestamp is finished after its grace period (a timer; or at once
with `finish_deletion`): its containers are terminated and the pod removed.

The test API changes the runtime state and writes the new status at once:
`restart_container`, `stop_container`, `set_container_ready`, `set_phase`,
`finish_deletion`, `remove_pod`; `wait_for_pod` awaits a condition on a pod.

Invariants: every kubelet write is a `pods/status` update through the store
(new resourceVersion, watch events) and only happens when the status really
changes, so the kubelet never loops on its own events; everything runs on the
event loop thread, so a status computed from a `get` is written without any
await in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any

from probemarker.sim.errors import ApiError
from probemarker.sim.kubelet.podstatus import ContainerState, PodRuntime, build_pod_status
from probemarker.sim.server.discovery import EVENTS, PODS
from probemarker.sim.store.objects import Store, prune_empty

PodKey = tuple[str, str]


def rfc3339(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_ip_for(index: int) -> str:
    """The index-th pod IP: 127.0.1.1, 127.0.1.2, ... (skipping .0 and .255)."""
    per_second = 255 * 254
    second, rest = divmod(index, per_second)
    return f"127.{second}.{1 + rest // 254}.{1 + rest % 254}"


def _restartable(container: dict[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


class _PodState:
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


class Kubelet:
    """See the module docstring."""

    def __init__(
        self,
        *,
        store: Store,
        node_names: tuple[str, ...],
        clock: Callable[[], datetime],
        auto_finish_deletion: bool = True,
        emit_events: bool = True,
    ) -> None:
        self._store = store
        self.node_names = node_names
        self._clock = clock
        self.auto_finish_deletion = auto_finish_deletion
        self._emit_events = emit_events
        self._pods: dict[PodKey, _PodState] = {}
        self._next_ip = 0
        self._changed = asyncio.Event()

    # -- the loop --------------------------------------------------------------------

    async def run(self) -> None:
        """Watch pods and keep their status; runs until cancelled."""
        watch = self._store.watch(
            PODS,
            namespace=None,
            label_selector=None,
            field_selector=None,
            resource_version=None,
            allow_bookmarks=False,
        )
        try:
            async for event in watch:
                if event.type in ("ADDED", "MODIFIED"):
                    self._sync(event.object)
                elif event.type == "DELETED":
                    self._forget(_key(event.object))
                self._changed.set()
        finally:
            watch.close()
            for state in self._pods.values():
                if state.deletion_timer is not None:
                    state.deletion_timer.cancel()

    def _sync(self, pod: dict[str, Any]) -> None:
        key = _key(pod)
        node = pod.get("spec", {}).get("nodeName")
        if node not in self.node_names:
            return
        state = self._pods.get(key)
        if state is None:
            state = self._start(pod)
            self._pods[key] = state
        deadline = pod["metadata"].get("deletionTimestamp")
        if deadline and deadline != state.deadline:
            # First deletion, or a later DELETE shortened the grace period.
            self._schedule_deletion(key, pod, state)
        self._write_status(key)

    def _start(self, pod: dict[str, Any]) -> _PodState:
        now = rfc3339(self._clock())
        ip = pod_ip_for(self._next_ip)
        self._next_ip += 1
        spec = pod.get("spec", {})
        containers = [self._new_container(c, now) for c in spec.get("containers") or []]
        inits: list[ContainerState] = []
        for c in spec.get("initContainers") or []:
            init = self._new_container(c, now)
            if not _restartable(c):
                init.running, init.reason, init.finished_at = False, "Completed", now
            inits.append(init)
        runtime = PodRuntime(pod_ip=ip, host_ip="127.0.0.1", start_time=now)
        if self._emit_events:
            for c in spec.get("initContainers", []) + spec.get("containers", []):
                self._event(
                    pod,
                    c["name"],
                    "Pulled",
                    f'Container image "{c.get("image", "")}" already present on machine',
                )
                self._event(pod, c["name"], "Created", f"Created container: {c['name']}")
                self._event(pod, c["name"], "Started", f"Started container {c['name']}")
        return _PodState(runtime, containers, inits)

    @staticmethod
    def _new_container(spec: dict[str, Any], now: str) -> ContainerState:
        return ContainerState(
            name=spec["name"],
            image=spec.get("image", ""),
            container_id=f"containerd://{secrets.token_hex(32)}",
            started_at=now,
        )

    def _write_status(self, key: PodKey) -> dict[str, Any] | None:
        state = self._pods.get(key)
        if state is None:
            return None
        try:
            pod = self._store.get(PODS, key[0], key[1])
        except ApiError:
            return None
        status = build_pod_status(
            pod, state.runtime, state.containers, state.init_containers, now=rfc3339(self._clock())
        )
        if prune_empty({"status": status}) == prune_empty({"status": pod.get("status") or {}}):
            return pod
        updated = copy.copy(pod)
        updated["status"] = status
        return self._store.update(
            PODS, updated, namespace=key[0], name=key[1], subresource="status"
        )

    def _event(
        self,
        pod: dict[str, Any],
        container: str,
        reason: str,
        message: str,
        event_type: str = "Normal",
    ) -> None:
        meta = pod["metadata"]
        now = rfc3339(self._clock())
        node = pod.get("spec", {}).get("nodeName", "")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta['name']}.{secrets.token_hex(8)}",
                "namespace": meta["namespace"],
            },
            "involvedObject": {
                "kind": "Pod",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta.get("uid", ""),
                "apiVersion": "v1",
                "resourceVersion": meta.get("resourceVersion", ""),
                "fieldPath": f"spec.containers{{{container}}}",
            },
            "reason": reason,
            "message": message,
            "source": {"component": "kubelet", "host": node},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": event_type,
            "reportingComponent": "kubelet",
            "reportingInstance": node,
        }
        with contextlib.suppress(ApiError):
            self._store.create(EVENTS, event, namespace=meta["namespace"])

    # -- deletion --------------------------------------------------------------------

    def _schedule_deletion(self, key: PodKey, pod: dict[str, Any], state: _PodState) -> None:
        """Finish the deletion at the pod's deletionTimestamp (its grace period's end)."""
        deadline = str(pod["metadata"]["deletionTimestamp"])
        if self._emit_events and not state.terminating:
            for c in pod.get("spec", {}).get("containers") or []:
                self._event(pod, c["name"], "Killing", f"Stopping container {c['name']}")
        state.terminating, state.deadline = True, deadline
        if state.deletion_timer is not None:
            state.deletion_timer.cancel()
            state.deletion_timer = None
        if not self.auto_finish_deletion:
            return
        ends = datetime.fromisoformat(deadline.replace("Z", "+00:00"))
        delay = max(0.0, (ends - self._clock()).total_seconds())
        state.deletion_timer = asyncio.get_running_loop().call_later(
            delay, self.finish_deletion, key[0], key[1]
        )

    def finish_deletion(self, namespace: str, name: str) -> bool:
        """End a terminating pod's grace period now: containers stop, the pod is removed."""
        key = (namespace, name)
        state = self._pods.get(key)
        if state is not None:
            if state.deletion_timer is not None:
                state.deletion_timer.cancel()
            now = rfc3339(self._clock())
            for c in state.containers + state.init_containers:
                if c.running:
                    c.running, c.exit_code, c.reason, c.finished_at = False, 0, "Completed", now
            self._write_status(key)
        return self.remove_pod(namespace, name)

    def finish_all_deletions(self) -> int:
        """Finish every terminating pod's deletion now; returns how many."""
        keys = [k for k, s in self._pods.items() if s.terminating]
        return sum(1 for k in keys if self.finish_deletion(*k))

    def remove_pod(self, namespace: str, name: str) -> bool:
        """Remove the pod from the store at once (a DELETED event), as a kubelet's final delete."""
        self._forget((namespace, name))
        try:
            self._store.remove(PODS, namespace, name)
        except ApiError:
            return False
        return True

    def _forget(self, key: PodKey) -> None:
        state = self._pods.pop(key, None)
        if state is not None and state.deletion_timer is not None:
            state.deletion_timer.cancel()

    # -- test API --------------------------------------------------------------------

    def pod_ip(self, namespace: str, name: str) -> str | None:
        state = self._pods.get((namespace, name))
        return state.runtime.pod_ip if state else None

    def _container(self, namespace: str, name: str, container: str) -> ContainerState:
        state = self._pods.get((namespace, name))
        if state is None:
            raise KeyError(f"pod {namespace}/{name} is not running on this kubelet")
        for c in state.containers + state.init_containers:
            if c.name == container:
                return c
        raise KeyError(f"pod {namespace}/{name} has no container {container}")

    def restart_container(
        self,
        namespace: str,
        name: str,
        container: str,
        *,
        exit_code: int = 137,
        reason: str = "Error",
    ) -> dict[str, Any] | None:
        """The container exits and is started again: new containerID, restartCount+1."""
        c = self._container(namespace, name, container)
        now = rfc3339(self._clock())
        c.last_terminated = {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": c.started_at,
            "finishedAt": now,
            "containerID": c.container_id,
        }
        c.container_id = f"containerd://{secrets.token_hex(32)}"
        c.started_at, c.restart_count, c.running = now, c.restart_count + 1, True
        return self._write_status((namespace, name))

    def stop_container(
        self,
        namespace: str,
        name: str,
        container: str,
        *,
        exit_code: int = 0,
        reason: str | None = None,
    ) -> dict[str, Any] | None:
        """The container terminates (state.terminated) and stays stopped."""
        c = self._container(namespace, name, container)
        c.running, c.exit_code = False, exit_code
        c.reason = reason or ("Completed" if exit_code == 0 else "Error")
        c.finished_at = rfc3339(self._clock())
        return self._write_status((namespace, name))

    def set_container_ready(
        self, namespace: str, name: str, container: str, ready: bool
    ) -> dict[str, Any] | None:
        self._container(namespace, name, container).ready = ready
        return self._write_status((namespace, name))

    def set_phase(
        self,
        namespace: str,
        name: str,
        phase: str,
        *,
        reason: str | None = None,
        message: str | None = None,
    ) -> dict[str, Any] | None:
        state = self._pods.get((namespace, name))
        if state is None:
            raise KeyError(f"pod {namespace}/{name} is not running on this kubelet")
        r = state.runtime
        state.runtime = PodRuntime(r.pod_ip, r.host_ip, r.start_time, phase, reason, message)
        return self._write_status((namespace, name))

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


def _key(pod: dict[str, Any]) -> PodKey:
    meta = pod.get("metadata", {})
    return (str(meta.get("namespace", "")), str(meta.get("name", "")))
