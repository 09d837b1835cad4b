"""Pure computation of the status a kubelet reports for a pod.

Given the pod (spec and current status) and the simulated container runtime
state, `build_pod_status` returns the new `status`, following the kubelet's
generateAPIPodStatus and pkg/kubelet/status/generate.go:

* conditions PodReadyToStartContainers, Initialized, Ready, ContainersReady,
  PodScheduled, in the order a 1.29+ kubelet lists them; conditions of other
  types (readiness gates, anything written by others) are kept as they are;
* ContainersReady is False with reason ContainersNotReady and message
  `containers with unready status: [a b]` while a container is not ready;
  Ready takes ContainersReady's status/reason/message when that is not True,
  else is False with reason ReadinessGatesNotReady (message per gate, joined
  by ", ") until every readiness gate's condition is True;
* `lastTransitionTime` changes only when a condition's status changes.

Pure: no I/O; the time is passed in.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

KUBELET_CONDITIONS = (
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
)


@dataclass(slots=True)
class ContainerState:
    """The simulated runtime's view of one container (mutable runtime state)."""

    name: str
    image: str
    container_id: str
    started_at: str
    restart_count: int = 0
    running: bool = True
    ready: bool = True
    exit_code: int = 0
    reason: str = ""
    finished_at: str = ""
    last_terminated: dict[str, Any] | None = None

    def to_status(self) -> dict[str, Any]:
        if self.running:
            state: dict[str, Any] = {"running": {"startedAt": self.started_at}}
        else:
            state = {
                "terminated": {
                    "exitCode": self.exit_code,
                    "reason": self.reason or ("Completed" if self.exit_code == 0 else "Error"),
                    "startedAt": self.started_at,
                    "finishedAt": self.finished_at,
                    "containerID": self.container_id,
                }
            }
        status: dict[str, Any] = {
            "name": self.name,
            "state": state,
            "ready": self.running and self.ready,
            "restartCount": self.restart_count,
            "image": self.image,
            "imageID": _image_id(self.image),
            "containerID": self.container_id,
            "started": self.running,
        }
        if self.last_terminated:
            status["lastState"] = {"terminated": self.last_terminated}
        return status


def _image_id(image: str) -> str:
    import hashlib

    digest = hashlib.sha256(image.encode()).hexdigest()
    repo = image.split("@", 1)[0].rsplit(":", 1)[0] if "/" in image or ":" in image else image
    return f"{repo}@sha256:{digest}"


@dataclass(frozen=True, slots=True)
class PodRuntime:
    """What the kubelet knows about a running pod besides its containers."""

    pod_ip: str
    host_ip: str
    start_time: str
    phase: str | None = None
    phase_reason: str | None = None
    phase_message: str | None = None


def _condition(
    old: dict[str, dict[str, Any]],
    ctype: str,
    status: str,
    now: str,
    reason: str | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    previous = old.get(ctype)
    since = now
    if previous is not None and previous.get("status") == status:
        since = previous.get("lastTransitionTime", now)
    cond: dict[str, Any] = {
        "type": ctype,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": since,
    }
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _ready_conditions(
    pod: dict[str, Any],
    containers: list[ContainerState],
    phase: str,
    conditions: list[dict[str, Any]],
) -> tuple[tuple[str, str | None, str | None], tuple[str, str | None, str | None]]:
    if phase == "Succeeded":
        done = ("False", "PodCompleted", None)
        return done, done
    unready = [c.name for c in containers if not (c.running and c.ready)]
    if unready:
        message = f"containers with unready status: [{' '.join(unready)}]"
        not_ready = ("False", "ContainersNotReady", message)
        return not_ready, not_ready
    by_type = {c.get("type"): c for c in conditions}
    messages = []
    for gate in pod.get("spec", {}).get("readinessGates") or []:
        ctype = gate.get("conditionType", "")
        cond = by_type.get(ctype)
        if cond is None:
            messages.append(
                f'corresponding condition of pod readiness gate "{ctype}" does not exist.'
            )
        elif cond.get("status") != "True":
            messages.append(
                f'the status of pod readiness gate "{ctype}" is not "True", but {cond.get("status")}'
            )
    containers_ready = ("True", None, None)
    if messages:
        return ("False", "ReadinessGatesNotReady", ", ".join(messages)), containers_ready
    return ("True", None, None), containers_ready


def build_pod_status(
    pod: dict[str, Any],
    runtime: PodRuntime,
    containers: list[ContainerState],
    init_containers: list[ContainerState],
    *,
    now: str,
) -> dict[str, Any]:
    """The status the kubelet would write for `pod` now (see module docstring)."""
    old_status = pod.get("status") or {}
    status = copy.deepcopy(old_status)
    phase = runtime.phase or _derive_phase(pod, containers)
    status["phase"] = phase
    if runtime.phase_reason:
        status["reason"] = runtime.phase_reason
    if runtime.phase_message:
        status["message"] = runtime.phase_message
    status["hostIP"] = runtime.host_ip
    status["hostIPs"] = [{"ip": runtime.host_ip}]
    status["podIP"] = runtime.pod_ip
    status["podIPs"] = [{"ip": runtime.pod_ip}]
    status["startTime"] = runtime.start_time
    status.setdefault("qosClass", "BestEffort")
    status["containerStatuses"] = [c.to_status() for c in containers]
    if init_containers:
        status["initContainerStatuses"] = [c.to_status() for c in init_containers]
    existing = list(old_status.get("conditions") or [])
    old_by_type = {c.get("type", ""): c for c in existing}
    ready, containers_ready = _ready_conditions(pod, containers + init_containers, phase, existing)
    computed = {
        "PodReadyToStartContainers": _condition(
            old_by_type, "PodReadyToStartContainers", "True", now
        ),
        "Initialized": _condition(old_by_type, "Initialized", "True", now),
        "Ready": _condition(old_by_type, "Ready", ready[0], now, ready[1], ready[2]),
        "ContainersReady": _condition(
            old_by_type,
            "ContainersReady",
            containers_ready[0],
            now,
            containers_ready[1],
            containers_ready[2],
        ),
        "PodScheduled": _condition(old_by_type, "PodScheduled", "True", now),
    }
    conditions = [computed[t] for t in KUBELET_CONDITIONS]
    conditions += [c for c in existing if c.get("type") not in computed]
    status["conditions"] = conditions
    return status


def _derive_phase(pod: dict[str, Any], containers: list[ContainerState]) -> str:
    policy = pod.get("spec", {}).get("restartPolicy", "Always")
    if policy == "Always" or any(c.running for c in containers):
        return "Running"
    if all(c.exit_code == 0 for c in containers):
        return "Succeeded"
    return "Failed"
