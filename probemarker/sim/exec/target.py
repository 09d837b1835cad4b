"""From a pod object to the container an exec runs in.

Stage: the sim's HTTP layer calls `exec_target_error` with the pod it found
(kube-apiserver's `streamLocation` in pkg/registry/core/pod/strategy.go:
default the container when the pod has exactly one, refuse unknown containers
and pods without a node, all 400 BadRequest), then `build_exec_target` for
what the simulated kubelet knows about that container: its environment,
scratch working directory and whether it is running.

Pure functions of the pod object; no I/O (the scratch working directory is created by
the runner when a command first runs there).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from probemarker.sim.errors import ApiError, BadRequest
from probemarker.sim.exec.runners import ExecTarget

__all__ = ["build_exec_target", "exec_target_error"]


def _container_names(pod: Mapping[str, Any], key: str) -> list[str]:
    return [str(c.get("name", "")) for c in pod.get("spec", {}).get(key) or []]


def _resolve_container(pod: Mapping[str, Any], container: str | None) -> str:
    name = pod.get("metadata", {}).get("name", "")
    regular = _container_names(pod, "containers")
    if not container:
        if len(regular) == 1:
            return regular[0]
        if not regular:
            raise BadRequest(f"a container name must be specified for pod {name}")
        message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(regular)}]"
        init = _container_names(pod, "initContainers")
        if init:
            message += f" or one of the init containers: [{' '.join(init)}]"
        raise BadRequest(message)
    every = _container_names(pod, "initContainers") + regular
    every += _container_names(pod, "ephemeralContainers")
    if container not in every:
        raise BadRequest(f"container {container} is not valid for pod {name}")
    return container


def exec_target_error(pod: Mapping[str, Any], container: str | None) -> ApiError | None:
    """kube-apiserver's refusal of an exec into `pod` (400 BadRequest), or None."""
    try:
        _resolve_container(pod, container)
    except ApiError as err:
        return err
    if not pod.get("spec", {}).get("nodeName"):
        name = pod.get("metadata", {}).get("name", "")
        return BadRequest(f"pod {name} does not have a host assigned")
    return None


def _field_ref(pod: Mapping[str, Any], path: str) -> str | None:
    meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status", {})
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": status.get("podIP"),
        "status.hostIP": status.get("hostIP"),
    }
    if path in simple:
        value = simple[path]
        return None if value is None else str(value)
    for prefix, key in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        if path.startswith(prefix + "['") and path.endswith("']"):
            return str((meta.get(key) or {}).get(path[len(prefix) + 2 : -2], ""))
    return None


def build_exec_target(
    pod: Mapping[str, Any], container: str | None, *, workdir_root: Path
) -> ExecTarget:
    """The `ExecTarget` for an exec into `pod` (call `exec_target_error` first).

    env: HOSTNAME (the runtime sets it to the pod's hostname) plus the
    container's `env` values and the fieldRef values of `valueFrom`; running:
    whether the kubelet reports that container running.
    """
    name = _resolve_container(pod, container)
    meta, spec = pod.get("metadata", {}), pod.get("spec", {})
    env: dict[str, str] = {"HOSTNAME": str(spec.get("hostname") or meta.get("name", ""))}
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for entry in spec.get(key) or []:
            if entry.get("name") != name:
                continue
            for var in entry.get("env") or []:
                ref = (var.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
                value = _field_ref(pod, ref) if ref else str(var.get("value", ""))
                if value is not None:
                    env[str(var["name"])] = value
    status = pod.get("status", {})
    running = any(
        s.get("name") == name and "running" in (s.get("state") or {})
        for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")
        for s in status.get(key) or []
    )
    uid = str(meta.get("uid", ""))
    return ExecTarget(
        namespace=str(meta.get("namespace", "")),
        pod=str(meta.get("name", "")),
        pod_uid=uid,
        container=name,
        env=env,
        workdir=workdir_root / (uid or str(meta.get("name", ""))) / name,
        running=running,
    )
