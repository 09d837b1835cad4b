"""The simulated kubelet: runs pods bound to the sim's nodes, on paper.

`Kubelet.run()` watches all pods in the store.  A pod whose `spec.nodeName`
is one of the kubelet's nodes is "started": it gets a pod IP from
127.0.0.0/8 (unique while the kubelet lives; tests can listen on it),
container IDs `containerd://<64 hex>`, running states, and the conditions a
kubelet sets (`podstatus.py`).  A container with a startupProbe is not
`started`, one with a readinessProbe not `ready`, until the test says the
probe passed (`set_container_started`, `set_container_ready`); probe results
belong to one container ID, so a restart resets them.  Every change of a pod's
conditions (e.g. a readiness gate's condition written by someone else) makes it
recompute Ready, as the kubelet's status manager does.  A pod with a
deletionTimestamp is finished after its grace period (a timer; or at once
with `finish_deletion`): its containers are terminated, the pod gets a terminal
phase (Succeeded/Failed) and is then removed.  A pod that is being or has been
deleted is never started again: not when the kubelet first sees it terminating,
and not by the events of a removed pod still queued in its watch.  Pulled/Created/Started/Killing
events go through `recorder.py` (repeats are counted).

The test API changes the runtime state and writes the new status at once:
`restart_container` (two writes: terminated, then running again),
`stop_container`, `set_container_ready`, `set_container_started`, `set_phase`,
`finish_deletion`, `remove_pod`; `wait_for_pod` etc. (`waiting.py`) await a
condition on a pod.

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
import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from probemarker.sim.errors import ApiError
from probemarker.sim.kubelet.podstatus import (
    ContainerState,
    PodRuntime,
    build_pod_status,
    kubelet_view,
)
from probemarker.sim.kubelet.recorder import EventRecorder
from probemarker.sim.kubelet.runtime import (
    PodState,
    new_container,
    pod_ip_for,
    restartable,
    rfc3339,
)
from probemarker.sim.kubelet.waiting import PodWaits
from probemarker.sim.server.discovery.catalog import PODS
from probemarker.sim.store.objects import Store

__all__ = ["Kubelet", "pod_ip_for", "rfc3339"]

PodKey = tuple[str, str]

log = logging.getLogger(__name__)


class Kubelet(PodWaits):
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
        self._pods: dict[PodKey, PodState] = {}
        # UIDs of pods this kubelet removed whose DELETED event it has not seen yet: the
        # events queued before it (its own status writes) must not start them again.
        self._removed: set[str] = set()
        self._next_ip = 0
        self._changed = asyncio.Event()
        self._recorder = EventRecorder(store=store, clock=lambda: rfc3339(self._clock()))

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
                if event.type == "ADDED":
                    self._warn_if_foreign(event.object)
                if event.type in ("ADDED", "MODIFIED"):
                    self._sync(event.object)
                elif event.type == "DELETED":
                    self._removed.discard(_uid(event.object))
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
        if node not in self.node_names or _uid(pod) in self._removed:
            return
        state = self._pods.get(key)
        if state is None:
            if pod["metadata"].get("deletionTimestamp"):
                return  # being deleted and not running here: never started (again)
            # The first status is written before the sandbox exists (Pending,
            # ContainerCreating), the running one once the containers started.
            state = self._start(pod)
            self._pods[key] = state
            self._write_status(key)
            state.runtime = dataclasses.replace(state.runtime, creating=False)
            spec = pod.get("spec", {})
            for c in spec.get("initContainers", []) + spec.get("containers", []):
                self._container_started_events(pod, c)
        deadline = pod["metadata"].get("deletionTimestamp")
        if deadline and deadline != state.deadline:
            # First deletion, or a later DELETE shortened the grace period.
            self._schedule_deletion(key, pod, state)
        self._write_status(key)

    def _warn_if_foreign(self, pod: dict[str, Any]) -> None:
        """Log why a pod created bound to a node this kubelet does not run stays Pending."""
        node = pod.get("spec", {}).get("nodeName")
        if not node or node in self.node_names:
            return
        ns, name = _key(pod)
        node = _safe(str(node))
        log.warning(
            "pod %s/%s is bound to node %s, which this sim does not run (its nodes: %s), "
            "so it stays Pending: start the sim with --nodes %s "
            "(SimCluster(node_names=...) in tests), or set spec.nodeName to one of its nodes",
            _safe(ns),
            _safe(name),
            node,
            ",".join(self.node_names) or "none",
            ",".join((*self.node_names, node)),
        )

    def _start(self, pod: dict[str, Any]) -> PodState:
        now = rfc3339(self._clock())
        ip = pod_ip_for(self._next_ip)
        self._next_ip += 1
        spec = pod.get("spec", {})
        containers = [new_container(c, now) for c in spec.get("containers") or []]
        inits: list[ContainerState] = []
        for c in spec.get("initContainers") or []:
            init = new_container(c, now)
            if not restartable(c):
                init.init, init.running = True, False
                init.reason, init.finished_at = "Completed", now
            inits.append(init)
        runtime = PodRuntime(pod_ip=ip, host_ip="127.0.0.1", start_time=now, creating=True)
        return PodState(runtime, containers, inits)

    def _container_started_events(self, pod: dict[str, Any], spec: dict[str, Any]) -> None:
        if not self._emit_events:
            return
        name, image = spec["name"], spec.get("image", "")
        pulled = f'Container image "{image}" already present on machine'
        self._recorder.record(pod, name, "Pulled", pulled)
        self._recorder.record(pod, name, "Created", f"Created container: {name}")
        self._recorder.record(pod, name, "Started", f"Started container {name}")

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
        if kubelet_view(status) == kubelet_view(pod.get("status") or {}):
            return pod
        updated = copy.copy(pod)
        updated["status"] = status
        return self._store.update(
            PODS, updated, namespace=key[0], name=key[1], subresource="status"
        )

    # -- deletion --------------------------------------------------------------------

    def _schedule_deletion(self, key: PodKey, pod: dict[str, Any], state: PodState) -> None:
        """Finish the deletion at the pod's deletionTimestamp (its grace period's end)."""
        deadline = str(pod["metadata"]["deletionTimestamp"])
        if self._emit_events and not state.terminating:
            for c in state.init_containers + state.containers:
                if c.running:
                    self._recorder.record(pod, c.name, "Killing", f"Stopping container {c.name}")
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

    def finish_deletion(self, namespace: str, name: str, *, exit_code: int = 0) -> bool:
        """End a terminating pod's grace period now: the running containers stop with
        `exit_code` (0 Completed; e.g. 137 Error for one killed at the grace period's
        end), the pod gets phase Succeeded (all 0) or Failed, and is removed."""
        key = (namespace, name)
        state = self._pods.get(key)
        if state is not None:
            if state.deletion_timer is not None:
                state.deletion_timer.cancel()
            now = rfc3339(self._clock())
            for c in state.containers + state.init_containers:
                if c.running:
                    c.running, c.exit_code, c.finished_at = False, exit_code, now
                    c.reason = "Completed" if exit_code == 0 else "Error"
            # killPod stopped the containers and the sandbox: getPhase with
            # podIsTerminal gives Succeeded/Failed, written before the final delete.
            state.runtime = dataclasses.replace(state.runtime, terminal=True, sandbox_ready=False)
            self._write_status(key)
        return self.remove_pod(namespace, name)

    def finish_all_deletions(self) -> int:
        """Finish every terminating pod's deletion now; returns how many."""
        keys = [k for k, s in self._pods.items() if s.terminating]
        return sum(1 for k in keys if self.finish_deletion(*k))

    def remove_pod(self, namespace: str, name: str) -> bool:
        """Remove the pod from the store at once (a DELETED event), as a kubelet's final
        delete. Events about it still queued in the watch never start it again."""
        self._forget((namespace, name))
        try:
            removed = self._store.remove(PODS, namespace, name)
        except ApiError:
            return False
        if uid := _uid(removed):
            self._removed.add(uid)
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
        """The container exits and is started again, in two status writes as a kubelet
        makes them: first state.terminated (not started, not ready: ContainersReady and
        Ready False), then the new container running: new containerID and startedAt,
        restartCount+1, lastState.terminated = the old one, probe results reset."""
        state = self._pods.get((namespace, name))
        c = self._container(namespace, name, container)
        now = rfc3339(self._clock())
        c.running, c.exit_code, c.reason, c.finished_at = False, exit_code, reason, now
        self._write_status((namespace, name))
        spec = self._container_spec(namespace, name, container)
        fresh = new_container(spec, now, restart_count=c.restart_count + 1)
        fresh.last_terminated = c.terminated_state()
        fresh.init = c.init
        if state is not None:
            for group in (state.containers, state.init_containers):
                group[:] = [fresh if x is c else x for x in group]
        pod = self._write_status((namespace, name))
        if pod is not None:
            self._container_started_events(pod, spec)
        return pod

    def _container_spec(self, namespace: str, name: str, container: str) -> dict[str, Any]:
        spec: dict[str, Any] = {"name": container}
        with contextlib.suppress(ApiError):
            pod_spec = self._store.get(PODS, namespace, name).get("spec", {})
            for c in (pod_spec.get("initContainers") or []) + (pod_spec.get("containers") or []):
                if c.get("name") == container:
                    spec = c
        return spec

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
        """The readiness probe's result for the current container (ready needs started)."""
        self._container(namespace, name, container).ready = ready
        return self._write_status((namespace, name))

    def set_container_started(
        self, namespace: str, name: str, container: str, started: bool = True
    ) -> dict[str, Any] | None:
        """The startup probe's result for the current container (started needs running)."""
        self._container(namespace, name, container).startup_passed = started
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
        state.runtime = dataclasses.replace(
            state.runtime, phase=phase, phase_reason=reason, phase_message=message
        )
        return self._write_status((namespace, name))


def _safe(text: str) -> str:
    """`text` with control characters escaped, so a name cannot split a log line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _uid(pod: dict[str, Any]) -> str:
    return str(pod.get("metadata", {}).get("uid", ""))


def _key(pod: dict[str, Any]) -> PodKey:
    meta = pod.get("metadata", {})
    return (str(meta.get("namespace", "")), str(meta.get("name", "")))
