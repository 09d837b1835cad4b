"""Which container the cri exec backend may run a probe's command in (pure).

Stage: probe; the decisions of the cri exec handler (`probemarker.probe.cri`, which
makes the calls) about the container. Inputs: the pod status's `containerID` of the
probe's container, the connected runtime's name, and the runtime's ContainerStatus
answer (the ID it found, the labels the container was made with). Outputs: the ID to
ask the runtime about, or why there is none (`container_ref`); whether the answer
confirms that container as the probe's (`confirmation_problem`, "" when it does).

Invariant: no string from a pod status reaches the runtime unless it is exactly a full
container ID of the runtime's form, and nothing runs in a container until the runtime
has confirmed, for that full ID, that the kubelet made it for the probe's pod and
container. Only the ID the runtime confirmed goes to ExecSync and into the handler's
cache of checked containers.

Why so strict. The pod status is a claim, written through the API server by anyone
who may patch `pods/status`; the runtime takes a container ID loosely. containerd's
CRI store (`containerStore.Get`) and CRI-O's (`ctrIDIndex`) look IDs up in a
truncindex, where any unique prefix names a container, for ContainerStatus and
ExecSync alike. A prefix names the pod's own container while it is the only match,
and another pod's container once that one is gone and a new one shares the digits: a
check remembered for the prefix would then run the marker's command there. Both
runtimes make an ID of 32 random bytes in lowercase hex (containerd's
`util.GenerateID`, CRI-O's `stringid.GenerateNonCryptoID`), and the kubelet writes it
whole, as `<runtime name>://<id>` (`kubecontainer.ContainerID`: the runtime's name
from Version, "://", the ID). So anything else (a prefix, upper case, padding, other
characters) is not the kubelet's writing and is refused before any call; and the ID
in the runtime's ContainerStatus answer must be the one asked for, should a runtime
ever resolve other spellings.

Whose container: the kubelet creates every container with the labels
`io.kubernetes.pod.uid` and `io.kubernetes.container.name` (kuberuntime/labels.go);
they must name the probe's pod UID and container, so a status that points elsewhere
(copied, forged, or stale after a re-creation under the same name) never makes the
daemon run a marker's command in another pod's container. The api backend gets the
same guarantee from the API server, which finds the container by pod and name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from probemarker.cri.client import ContainerInfo, RuntimeInfo
from probemarker.probe.handler import ProbeTarget

__all__ = [
    "CONTAINER_NAME_LABEL",
    "FULL_ID",
    "POD_UID_LABEL",
    "ContainerRef",
    "confirmation_problem",
    "container_ref",
    "ownership_problem",
]

POD_UID_LABEL = "io.kubernetes.pod.uid"  # set by the kubelet on every container
CONTAINER_NAME_LABEL = "io.kubernetes.container.name"
_POD_LABELS = ("io.kubernetes.pod.namespace", "io.kubernetes.pod.name")
# The full ID of containerd and CRI-O: 32 bytes in lowercase hex. `fullmatch`, so no
# trailing newline slips through as it would with `$`; [0-9a-f], not \d or \w, so no
# other script's digits either.
FULL_ID = re.compile(r"[0-9a-f]{64}")
_SHOWN = 80  # characters of a pod status value quoted in a message (it may be long)


@dataclass(frozen=True, slots=True)
class ContainerRef:
    """A full container ID in the runtime's terms (`id`), or why there is none (`problem`)."""

    id: str = ""
    problem: str = ""


def shown(value: str) -> str:
    """`value` quoted for a message: escaped (repr), and cut when long."""
    if len(value) <= _SHOWN:
        return repr(value)
    return f"{value[:_SHOWN]!r}... ({len(value)} characters)"


def container_ref(container_id: str, runtime: RuntimeInfo, *, endpoint: str) -> ContainerRef:
    """The runtime's full ID for the pod status value `container_id`, or the problem."""
    scheme, sep, bare = container_id.partition("://")
    if not container_id:
        return ContainerRef(problem="the pod status gives the container no containerID yet")
    if not sep or not bare:
        return ContainerRef(
            problem=f"containerID {shown(container_id)} in the pod status is not <runtime>://<id>"
        )
    if scheme != runtime.name:
        return ContainerRef(
            problem=(
                f"the container runs on {scheme!r} but --cri-endpoint {endpoint} is "
                f"{runtime.name!r}: point --cri-endpoint at the {scheme} socket, or use "
                "--exec-backend api on this node"
            )
        )
    if FULL_ID.fullmatch(bare) is None:
        return ContainerRef(
            problem=(
                f"containerID {shown(container_id)} in the pod status is not a full "
                f"{runtime.name} container ID (64 lowercase hex digits after {scheme}://, "
                "as the kubelet writes it): the runtime would take a prefix for whichever "
                "container's ID starts so, another pod's too; nothing is run"
            )
        )
    return ContainerRef(id=bare)


def ownership_problem(labels: Mapping[str, str], target: ProbeTarget, *, short_id: str) -> str:
    """Why the container labelled `labels` is not `target`'s to run in, or ""."""
    uid, name = labels.get(POD_UID_LABEL), labels.get(CONTAINER_NAME_LABEL)
    if uid is None or name is None:
        return (
            f"the runtime's container {short_id} has no kubelet labels ({POD_UID_LABEL}, "
            f"{CONTAINER_NAME_LABEL}): the kubelet did not make it for this pod; nothing "
            "is run in it"
        )
    if uid == target.pod_uid and name == target.container:
        return ""
    owner = "/".join(labels.get(key, "?") for key in _POD_LABELS)
    return (
        f"the pod status names container {short_id}, which the runtime says is container "
        f"{name!r} of pod {owner} (uid {uid}), not {target.container!r} of this pod (uid "
        f"{target.pod_uid}); nothing is run in it"
    )


def confirmation_problem(asked: str, answer: ContainerInfo, target: ProbeTarget) -> str:
    """Why the runtime's ContainerStatus `answer` for the full ID `asked` does not make
    it `target`'s container to run in, or "" when it does."""
    if answer.id != asked:
        return (
            f"the runtime answered ContainerStatus for {asked[:12]} with container "
            f"{shown(answer.id)}, not the ID asked for; nothing is run in it"
        )
    return ownership_problem(answer.labels, target, short_id=asked[:12])
