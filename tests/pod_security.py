"""Which Pod Security Standards checks would a pod spec fail? Evaluated as kube-apiserver's
Pod Security admission evaluates them, for the manifest tests (offline, no cluster).

Stage: a test helper. Input: a PodSpec as a dict (a DaemonSet's `spec.template.spec`, as
rendered) and its metadata's annotations. Output: the `ForbiddenReason`s of the checks
the spec fails at a level (`baseline` or `restricted`), in the API server's words, e.g.
`restricted volume types` for a hostPath volume at `restricted`; an empty list means the
level admits it. `privileged` admits everything.

Follows staging/src/k8s.io/pod-security-admission/policy/check_*.go of Kubernetes 1.32,
the `latest` version of each check (what a namespace label without `-version` means):
- baseline: host namespaces, privileged, non-default capabilities (anything added but
  the 13 allowed), hostPath volumes, hostPort, AppArmor profile type, seLinuxOptions
  (type among the allowed, no user or role), procMount, seccompProfile (not
  Unconfined), sysctls (the safe set of 1.32), Windows hostProcess;
- restricted adds: volume types (configMap, csi, downwardAPI, emptyDir, ephemeral,
  persistentVolumeClaim, projected, secret only; it replaces the hostPath check),
  allowPrivilegeEscalation explicitly false, runAsNonRoot true (pod or every container),
  no runAsUser 0, seccompProfile RuntimeDefault or Localhost (pod or every container;
  it replaces the baseline one), capabilities: drop ALL and add nothing but
  NET_BIND_SERVICE (it replaces the baseline one).
Every container means containers, initContainers and ephemeralContainers (the policy's
`visitContainers`). Left out: the relaxations for Windows pods (`spec.os.name: windows`)
and for user-namespaced pods (`hostUsers: false`, behind a feature gate in 1.32), the
checks' older versions, and the pre-1.19 seccomp annotations; a spec that sets one of
those gets an error here rather than a guess.

The spec is taken as written: the API server's own changes before admission are not
made (a hostNetwork pod's ports get `hostPort` defaulted; an `appArmorProfile` field
gets its annotation added, so the reason becomes "profiles"; `procMount` is dropped
while the ProcMountType feature is off; `privileged` is refused by validation when the
API server runs with `--allow-privileged=false`). Cross-checked once against
kube-apiserver 1.32 server dry runs (tests/manifests/test_pod_security.py says how).

Invariants: pure functions; a reason appears once, however many containers fail it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["LEVELS", "PodSecurityError", "violations"]

LEVELS = ("privileged", "baseline", "restricted")

Spec = Mapping[str, Any]

BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
    }
)
SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)
RESTRICTED_VOLUME_SOURCES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
GOOD_SECCOMP = frozenset({"RuntimeDefault", "Localhost"})
APPARMOR_TYPES = frozenset({"RuntimeDefault", "Localhost"})
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


class PodSecurityError(ValueError):
    """A spec this helper does not evaluate (see the module docstring)."""


def containers(spec: Spec) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or ()


def context(container: Mapping[str, Any]) -> Mapping[str, Any]:
    return container.get("securityContext") or {}


def pod_context(spec: Spec) -> Mapping[str, Any]:
    return spec.get("securityContext") or {}


# -- baseline ---------------------------------------------------------------------------


def host_namespaces(spec: Spec, _: Mapping[str, str]) -> bool:
    return not any(spec.get(key) for key in ("hostNetwork", "hostPID", "hostIPC"))


def privileged(spec: Spec, _: Mapping[str, str]) -> bool:
    return not any(context(c).get("privileged") for c in containers(spec))


def capabilities_baseline(spec: Spec, _: Mapping[str, str]) -> bool:
    added = {
        a for c in containers(spec) for a in (context(c).get("capabilities") or {}).get("add") or ()
    }
    return added <= BASELINE_CAPABILITIES


def host_path_volumes(spec: Spec, _: Mapping[str, str]) -> bool:
    return not any("hostPath" in volume for volume in spec.get("volumes") or ())


def host_ports(spec: Spec, _: Mapping[str, str]) -> bool:
    return not any(port.get("hostPort") for c in containers(spec) for port in c.get("ports") or ())


def app_armor_bad(spec: Spec, annotations: Mapping[str, str]) -> int:
    """How many bad values: profile types set on the pod or a container, and annotations."""
    types = {(pod_context(spec).get("appArmorProfile") or {}).get("type")}
    types |= {(context(c).get("appArmorProfile") or {}).get("type") for c in containers(spec)}
    bad = {t for t in types if t is not None and t not in APPARMOR_TYPES}
    notes = [
        key
        for key, value in annotations.items()
        if key.startswith(APPARMOR_ANNOTATION_PREFIX)
        and not (not value or value == "runtime/default" or value.startswith("localhost/"))
    ]
    return len(bad) + len(notes)


def app_armor(spec: Spec, annotations: Mapping[str, str]) -> bool:
    return app_armor_bad(spec, annotations) == 0


def se_linux(spec: Spec, _: Mapping[str, str]) -> bool:
    options = [pod_context(spec).get("seLinuxOptions")]
    options += [context(c).get("seLinuxOptions") for c in containers(spec)]
    return all(
        o.get("type", "") in SELINUX_TYPES and not o.get("user") and not o.get("role")
        for o in options
        if o is not None
    )


def proc_mount(spec: Spec, _: Mapping[str, str]) -> bool:
    return all(context(c).get("procMount", "Default") == "Default" for c in containers(spec))


def seccomp_baseline(spec: Spec, _: Mapping[str, str]) -> bool:
    profiles = [pod_context(spec).get("seccompProfile")]
    profiles += [context(c).get("seccompProfile") for c in containers(spec)]
    return all(p.get("type") in GOOD_SECCOMP for p in profiles if p is not None)


def sysctls(spec: Spec, _: Mapping[str, str]) -> bool:
    return all(s.get("name") in SAFE_SYSCTLS for s in pod_context(spec).get("sysctls") or ())


def host_process(spec: Spec, _: Mapping[str, str]) -> bool:
    setters = [pod_context(spec), *(context(c) for c in containers(spec))]
    return not any((s.get("windowsOptions") or {}).get("hostProcess") for s in setters)


# -- restricted -------------------------------------------------------------------------


def restricted_volumes(spec: Spec, _: Mapping[str, str]) -> bool:
    return all(
        set(volume) - {"name"} <= RESTRICTED_VOLUME_SOURCES for volume in spec.get("volumes") or ()
    )


def allow_privilege_escalation(spec: Spec, _: Mapping[str, str]) -> bool:
    return all(context(c).get("allowPrivilegeEscalation") is False for c in containers(spec))


def run_as_non_root(spec: Spec, _: Mapping[str, str]) -> bool:
    pod = pod_context(spec).get("runAsNonRoot")
    if pod is False:
        return False
    for c in containers(spec):
        own = context(c).get("runAsNonRoot")
        if own is False or (own is None and pod is not True):
            return False
    return True


def run_as_user(spec: Spec, _: Mapping[str, str]) -> bool:
    setters = [pod_context(spec), *(context(c) for c in containers(spec))]
    return not any(s.get("runAsUser") == 0 for s in setters)


def seccomp_restricted(spec: Spec, _: Mapping[str, str]) -> bool:
    pod = pod_context(spec).get("seccompProfile")
    if pod is not None and pod.get("type") not in GOOD_SECCOMP:
        return False
    for c in containers(spec):
        own = context(c).get("seccompProfile")
        if own is not None and own.get("type") not in GOOD_SECCOMP:
            return False
        if own is None and pod is None:
            return False
    return True


def capabilities_restricted(spec: Spec, _: Mapping[str, str]) -> bool:
    for c in containers(spec):
        caps = context(c).get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or ()):
            return False
        if set(caps.get("add") or ()) - {"NET_BIND_SERVICE"}:
            return False
    return True


Check = Callable[[Spec, Mapping[str, str]], bool]

# (ForbiddenReason, check, the baseline check it replaces at restricted)
BASELINE: tuple[tuple[str, Check], ...] = (
    ("host namespaces", host_namespaces),
    ("privileged", privileged),
    ("non-default capabilities", capabilities_baseline),
    ("hostPath volumes", host_path_volumes),
    ("hostPort", host_ports),
    ("forbidden AppArmor profile", app_armor),
    ("seLinuxOptions", se_linux),
    ("procMount", proc_mount),
    ("seccompProfile", seccomp_baseline),
    ("forbidden sysctls", sysctls),
    ("hostProcess", host_process),
)
RESTRICTED: tuple[tuple[str, Check, str], ...] = (
    ("restricted volume types", restricted_volumes, "hostPath volumes"),
    ("allowPrivilegeEscalation != false", allow_privilege_escalation, ""),
    ("runAsNonRoot != true", run_as_non_root, ""),
    ("runAsUser=0", run_as_user, ""),
    ("seccompProfile", seccomp_restricted, "seccompProfile"),
    ("unrestricted capabilities", capabilities_restricted, "non-default capabilities"),
)


def violations(spec: Spec, level: str, annotations: Mapping[str, str] | None = None) -> list[str]:
    """The reasons `spec` fails `level`, in the order the checks are listed above."""
    if level not in LEVELS:
        raise PodSecurityError(f"Pod Security level {level!r}: expected one of {LEVELS}")
    if (spec.get("os") or {}).get("name") == "windows" or spec.get("hostUsers") is False:
        raise PodSecurityError("Windows and user-namespaced pods are not evaluated here")
    if level == "privileged":
        return []
    notes = annotations or {}
    replaced = {old for _, _, old in RESTRICTED} if level == "restricted" else set()
    checks: list[tuple[str, Check]] = [(r, c) for r, c in BASELINE if r not in replaced]
    if level == "restricted":
        checks += [(r, c) for r, c, _ in RESTRICTED]
    found: list[str] = []
    for reason, check in checks:
        if reason == "forbidden AppArmor profile" and app_armor_bad(spec, notes) > 1:
            reason += "s"  # the policy's pluralize(), by the number of bad values
        if not check(spec, notes) and reason not in found:
            found.append(reason)
    return found
