"""The Node object the simulated kubelet registers for each of the sim's nodes.

Shaped like what a 1.32 kubelet registers and keeps updating
(pkg/kubelet/kubelet_node_status.go and nodestatus/setters.go): the well-known
labels, addresses (InternalIP 127.0.0.1, the hostname), capacity and
allocatable, the four kubelet conditions in their order (MemoryPressure,
DiskPressure, PIDPressure False; Ready True) with the kubelet's reasons and
messages, daemonEndpoints and nodeInfo.  Pure: the time is passed in.
"""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = ["KUBELET_VERSION", "node_object"]

KUBELET_VERSION = "v1.32.2"

_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)  # fmt: skip


def _resources(memory: str) -> dict[str, str]:
    return {
        "cpu": "2",
        "ephemeral-storage": "41152812Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": memory,
        "pods": "110",
    }


def node_object(name: str, *, now: str) -> dict[str, Any]:
    """The Node `name` as its kubelet registers it, at time `now` (RFC 3339)."""
    ident = hashlib.sha256(name.encode()).hexdigest()
    uuid_like = f"{ident[:8]}-{ident[8:12]}-{ident[12:16]}-{ident[16:20]}-{ident[20:32]}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
            },
            "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {},
        "status": {
            "capacity": _resources("8148012Ki"),
            "allocatable": _resources("8045612Ki"),
            "conditions": [
                {
                    "type": ctype,
                    "status": status,
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                    "reason": reason,
                    "message": message,
                }
                for ctype, status, reason, message in _CONDITIONS
            ],
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": ident[:32],
                "systemUUID": uuid_like,
                "bootID": uuid_like,
                "kernelVersion": "6.1.0",
                "osImage": "probemarker sim",
                "containerRuntimeVersion": "containerd://1.7.24",
                "kubeletVersion": KUBELET_VERSION,
                # set while the DisableNodeKubeProxyVersion gate is off (its 1.32 default)
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }
