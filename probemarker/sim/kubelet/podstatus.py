"""Pure computation of the status a kubelet reports for a pod.

Given the pod (spec and current status) and the simulated container runtime
state, `build_pod_status` returns the new `status`, following the kubelet's
generateAPIPodStatus, getPhase, the prober manager's UpdatePodStatus and
pkg/kubelet/status (generate.go, status_manager.go mergePodStatus):

* conditions: those the kubelet does not own (readiness gates, anything
  written by others) first, in their stored order, then PodReadyToStartContainers,
  Initialized, Ready, ContainersReady, PodScheduled, as mergePodStatus orders them;
* `started` is true only while running and the startup probe (if any) passed;
  `ready` needs `started` and the readiness probe (if any) passed; a completed
  regular init container is ready (exit 0) and not started;
* ContainersReady counts restartable init containers (sidecars) and regular
  containers, in spec order: False with reason ContainersNotReady and message
  `containers with unready status: [a b]` while one is not ready; Ready takes
  ContainersReady's status/reason/message when that is not True, else is False
  with reason ReadinessGatesNotReady (message per gate, joined by ", ") until
  every readiness gate's condition is True; a terminal phase gives both reason
  PodCompleted (Succeeded) or PodFailed (Failed);
* `lastTransitionTime` changes only when a condition's status changes;
* containerStatuses are sorted by name (init ones in spec order), always carry
  `lastState` ({} when none) and the spec's volumeMounts; `image`/`imageID` are
  normalized as containerd reports them (`docker.io/library/busybox:1.36`);
* the first status (`PodRuntime.creating`) is phase Pending without a pod IP,
  containers waiting (ContainerCreating, or PodInitializing with init
  containers), Initialized False while init containers are pending.

Pure: no I/O; the time is passed in.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from probemarker.sim.kubelet.images import image_id, normalized_image
from probemarker.sim.server.kinds.qos import pod_qos_class
from probemarker.sim.store.objmeta import prune_empty

KUBELET_CONDITIONS = (
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
)
_TERMINAL_REASON = {"Succeeded": "PodCompleted", "Failed": "PodFailed"}


@dataclass(slots=True)
class ContainerState:
    """The simulated runtime's view of one container (mutable runtime state).

    `ready` and `startup_passed` are the readiness and startup probe results
    for the current container (True when the container has no such probe);
    `init` marks a regular (run-to-completion) init container.
    """

    name: str
    image: str
    container_id: str
    started_at: str
    restart_count: int = 0
    running: bool = True
    ready: bool = True
    startup_passed: bool = True
    init: bool = False
    exit_code: int = 0
    reason: str = ""
    finished_at: str = ""
    last_terminated: dict[str, Any] | None = None
    volume_mounts: tuple[dict[str, Any], ...] = ()

    @property
    def started(self) -> bool:
        return self.running and self.startup_passed

    @property
    def is_ready(self) -> bool:
        if self.init:
            return not self.running and self.exit_code == 0
        return self.started and self.ready

    def terminated_state(self) -> dict[str, Any]:
        return {
            "exitCode": self.exit_code,
            "reason": self.reason or ("Completed" if self.exit_code == 0 else "Error"),
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "containerID": self.container_id,
        }

    def to_status(self) -> dict[str, Any]:
        if self.running:
            state: dict[str, Any] = {"running": {"startedAt": self.started_at}}
        else:
            state = {"terminated": self.terminated_state()}
        status: dict[str, Any] = {
            "name": self.name,
            "state": state,
            "lastState": {"terminated": self.last_terminated} if self.last_terminated else {},
            "ready": self.is_ready,
            "restartCount": self.restart_count,
            "image": normalized_image(self.image),
            "imageID": image_id(self.image),
            "containerID": self.container_id,
            "started": self.started,
        }
        return self._with_mounts(status)

    def waiting_status(self, reason: str) -> dict[str, Any]:
        """Before the runtime created it: the spec's image, no containerID, not started."""
        status: dict[str, Any] = {
            "name": self.name,
            "state": {"waiting": {"reason": reason}},
            "lastState": {},
            "ready": False,
            "restartCount": 0,
            "image": self.image,
            "imageID": "",
            "started": False,
        }
        return self._with_mounts(status)

    def _with_mounts(self, status: dict[str, Any]) -> dict[str, Any]:
        # convertToAPIContainerStatuses (RecursiveReadOnlyMounts, beta in 1.31)
        mounts = []
        for mount in self.volume_mounts:
            entry = {"name": mount.get("name", ""), "mountPath": mount.get("mountPath", "")}
            if mount.get("readOnly"):
                entry |= {"readOnly": True, "recursiveReadOnly": "Disabled"}
            mounts.append(entry)
        if mounts:
            status["volumeMounts"] = mounts
        return status


@dataclass(frozen=True, slots=True)
class PodRuntime:
    """What the kubelet knows about a running pod besides its containers.

    `terminal`: the pod was killed for deletion (getPhase's podIsTerminal: no
    restarts, the phase becomes Succeeded or Failed); `sandbox_ready`: the pod
    sandbox still runs (PodReadyToStartContainers); `creating`: the kubelet's
    first status, before the sandbox and containers exist (phase Pending,
    containers waiting in ContainerCreating or PodInitializing, no pod IP).
    """

    pod_ip: str
    host_ip: str
    start_time: str
    phase: str | None = None
    phase_reason: str | None = None
    phase_message: str | None = None
    terminal: bool = False
    sandbox_ready: bool = True
    creating: bool = False


Verdict = tuple[str, str | None, str | None]  # status, reason, message


def _condition(
    old: dict[str, dict[str, Any]], ctype: str, verdict: Verdict, now: str
) -> dict[str, Any]:
    status, reason, message = verdict
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
    counted: list[ContainerState],
    phase: str,
    conditions: list[dict[str, Any]],
    *,
    creating: bool = False,
) -> tuple[Verdict, Verdict]:
    """(Ready, ContainersReady) as GeneratePodReadyCondition / GenerateContainersReadyCondition."""
    if phase in _TERMINAL_REASON:
        done = ("False", _TERMINAL_REASON[phase], None)
        return done, done
    unready = [c.name for c in counted if creating or not c.is_ready]
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
    containers_ready: Verdict = ("True", None, None)
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
    if runtime.creating:
        phase = "Pending"
    else:
        phase = runtime.phase or _derive_phase(pod, containers, terminal=runtime.terminal)
    status["phase"] = phase
    if runtime.phase_reason:
        status["reason"] = runtime.phase_reason
    if runtime.phase_message:
        status["message"] = runtime.phase_message
    status["hostIP"] = runtime.host_ip
    status["hostIPs"] = [{"ip": runtime.host_ip}]
    if not runtime.creating:
        status["podIP"] = runtime.pod_ip
        status["podIPs"] = [{"ip": runtime.pod_ip}]
    status["startTime"] = runtime.start_time
    status["qosClass"] = pod_qos_class(pod)
    _container_statuses(status, runtime, containers, init_containers)
    existing = list(old_status.get("conditions") or [])
    old_by_type = {c.get("type", ""): c for c in existing}
    others = [c for c in existing if c.get("type") not in KUBELET_CONDITIONS]
    counted = [c for c in init_containers if not c.init] + containers
    ready, containers_ready = _ready_conditions(
        pod, counted, phase, others, creating=runtime.creating
    )
    initialized: Verdict = ("True", None, None)
    if runtime.creating and init_containers:
        names = " ".join(c.name for c in init_containers)
        message = f"containers with incomplete status: [{names}]"
        initialized = ("False", "ContainersNotInitialized", message)
    up = runtime.sandbox_ready and not runtime.creating
    sandbox: Verdict = ("True" if up else "False", None, None)
    verdicts: dict[str, Verdict] = {
        "PodReadyToStartContainers": sandbox,
        "Initialized": initialized,
        "Ready": ready,
        "ContainersReady": containers_ready,
        "PodScheduled": ("True", None, None),
    }
    status["conditions"] = others + [
        _condition(old_by_type, ctype, verdicts[ctype], now) for ctype in KUBELET_CONDITIONS
    ]
    return status


def _container_statuses(
    status: dict[str, Any],
    runtime: PodRuntime,
    containers: list[ContainerState],
    init_containers: list[ContainerState],
) -> None:
    """containerStatuses sorted by name (SortedContainerStatuses), init ones in spec order."""
    if runtime.creating:
        waiting = "PodInitializing" if init_containers else "ContainerCreating"
        regular = [c.waiting_status(waiting) for c in containers]
        inits = [c.waiting_status("PodInitializing") for c in init_containers]
    else:
        regular = [c.to_status() for c in containers]
        inits = [c.to_status() for c in init_containers]
    status["containerStatuses"] = sorted(regular, key=lambda c: str(c["name"]))
    if inits:
        status["initContainerStatuses"] = inits


def _derive_phase(pod: dict[str, Any], containers: list[ContainerState], *, terminal: bool) -> str:
    """getPhase for a pod whose init containers are done."""
    if any(c.running for c in containers):
        return "Running"
    policy = pod.get("spec", {}).get("restartPolicy", "Always")
    succeeded = all(c.exit_code == 0 for c in containers)
    if not terminal and (policy == "Always" or (policy == "OnFailure" and not succeeded)):
        return "Running"  # every container is being restarted
    return "Succeeded" if succeeded else "Failed"


def kubelet_view(status: dict[str, Any]) -> dict[str, Any]:
    """The status without conditions the kubelet does not own: as the status manager's
    isPodStatusByKubeletEqual, a change of those alone (or their order) is no reason
    for the kubelet to write."""
    conditions = [c for c in status.get("conditions") or [] if c.get("type") in KUBELET_CONDITIONS]
    return prune_empty({"status": status | {"conditions": conditions}})
