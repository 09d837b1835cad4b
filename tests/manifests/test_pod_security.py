"""tests/pod_security.py: each Pod Security check fails for the field it is about, at the
level kube-apiserver fails it, and only then. The starting point is the DaemonSet's own
pod spec (manifests/daemonset.yaml), which passes `restricted`; each case changes one
thing. The reasons are the API server's words.

Cross-checked once against a real kube-apiserver 1.32 (a bare control plane): each case's
spec created as a Pod with `kubectl create --dry-run=server` in a namespace with
`warn: baseline` and one with `warn: restricted`, the reasons read from the warning.
All agreed but where the API server changes or refuses the spec before Pod Security
sees it: hostNetwork (a hostPort is defaulted from the containerPort, so it also
reported hostPort; the case uses hostIPC now), the AppArmor field (its annotation is
added: "profiles"; the annotation case covers it), procMount (dropped: ProcMountType is
off) and hostProcess (valid only in a Windows pod on the host network, which this
helper does not evaluate). The privileged cases were checked with the server started
with --allow-privileged=true.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.manifests.test_manifests import POD, daemonset, dig
from tests.pod_security import PodSecurityError, violations

Spec = dict[str, Any]


def pod_spec() -> Spec:
    return copy.deepcopy(dig(daemonset(), POD))


def main(spec: Spec) -> Spec:
    container: Spec = spec["containers"][0]
    return container


def sc(spec: Spec) -> Spec:
    context: Spec = main(spec)["securityContext"]
    return context


def set_pod(**fields: Any) -> Callable[[Spec], None]:
    return lambda spec: spec["securityContext"].update(fields)


def set_main(**fields: Any) -> Callable[[Spec], None]:
    return lambda spec: sc(spec).update(fields)


def drop_main(field: str) -> Callable[[Spec], None]:
    return lambda spec: sc(spec).pop(field)


def drop_pod(field: str) -> Callable[[Spec], None]:
    return lambda spec: spec["securityContext"].pop(field)


def add_volume(volume: Spec) -> Callable[[Spec], None]:
    return lambda spec: spec.setdefault("volumes", []).append(volume)


def init_container(**context: Any) -> Callable[[Spec], None]:
    def change(spec: Spec) -> None:
        merged = {k: v for k, v in {**sc(spec), **context}.items() if v is not None}
        spec["initContainers"] = [{"name": "init", "image": "x", "securityContext": merged}]

    return change


# (change to the daemon's pod spec, what baseline reports, what restricted reports)
CASES = [
    pytest.param(lambda s: None, [], [], id="unchanged"),
    pytest.param(
        lambda s: s.update(hostIPC=True), ["host namespaces"], ["host namespaces"], id="hostIPC"
    ),
    pytest.param(
        lambda s: s.update(hostPID=True), ["host namespaces"], ["host namespaces"], id="hostPID"
    ),
    # privileged with allowPrivilegeEscalation false is invalid: the API server refuses it
    pytest.param(
        lambda s: (drop_main("allowPrivilegeEscalation")(s), set_main(privileged=True)(s)),
        ["privileged"],
        ["privileged", "allowPrivilegeEscalation != false"],
        id="privileged",
    ),
    pytest.param(
        set_main(capabilities={"drop": ["ALL"], "add": ["SYS_ADMIN"]}),
        ["non-default capabilities"],
        ["unrestricted capabilities"],
        id="cap-sys-admin",
    ),
    pytest.param(
        set_main(capabilities={"drop": ["ALL"], "add": ["CHOWN"]}),
        [],
        ["unrestricted capabilities"],
        id="cap-chown-baseline-only",
    ),
    pytest.param(
        set_main(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}),
        [],
        [],
        id="cap-net-bind",
    ),
    pytest.param(drop_main("capabilities"), [], ["unrestricted capabilities"], id="no-drop-all"),
    pytest.param(
        add_volume({"name": "s", "hostPath": {"path": "/run/x.sock", "type": "Socket"}}),
        ["hostPath volumes"],
        ["restricted volume types"],
        id="hostPath",
    ),
    pytest.param(
        add_volume({"name": "n", "nfs": {"server": "a", "path": "/"}}),
        [],
        ["restricted volume types"],
        id="nfs",
    ),
    pytest.param(add_volume({"name": "e", "emptyDir": {}}), [], [], id="emptyDir"),
    pytest.param(add_volume({"name": "p", "projected": {"sources": []}}), [], [], id="projected"),
    pytest.param(
        lambda s: main(s).update(ports=[{"containerPort": 1, "hostPort": 1}]),
        ["hostPort"],
        ["hostPort"],
        id="hostPort",
    ),
    pytest.param(
        set_main(appArmorProfile={"type": "Unconfined"}),
        ["forbidden AppArmor profile"],
        ["forbidden AppArmor profile"],
        id="apparmor-unconfined",
    ),
    pytest.param(
        set_pod(seLinuxOptions={"type": "spc_t"}),
        ["seLinuxOptions"],
        ["seLinuxOptions"],
        id="selinux-spc_t",
    ),
    pytest.param(set_main(procMount="Unmasked"), ["procMount"], ["procMount"], id="procMount"),
    pytest.param(
        set_pod(seccompProfile={"type": "Unconfined"}),
        ["seccompProfile"],
        ["seccompProfile"],
        id="seccomp-unconfined",
    ),
    pytest.param(drop_pod("seccompProfile"), [], ["seccompProfile"], id="seccomp-unset"),
    pytest.param(
        set_pod(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
        ["forbidden sysctls"],
        ["forbidden sysctls"],
        id="sysctl",
    ),
    pytest.param(
        set_pod(sysctls=[{"name": "net.ipv4.tcp_rmem", "value": "1 2 3"}]),
        [],
        [],
        id="sysctl-safe-1.32",
    ),
    pytest.param(
        set_main(windowsOptions={"hostProcess": True}),
        ["hostProcess"],
        ["hostProcess"],
        id="hostProcess",
    ),
    pytest.param(
        drop_main("allowPrivilegeEscalation"),
        [],
        ["allowPrivilegeEscalation != false"],
        id="escalation-unset",
    ),
    pytest.param(
        set_pod(runAsNonRoot=False), [], ["runAsNonRoot != true"], id="runAsNonRoot-false"
    ),
    pytest.param(drop_pod("runAsNonRoot"), [], ["runAsNonRoot != true"], id="runAsNonRoot-unset"),
    pytest.param(
        lambda s: (drop_pod("runAsNonRoot")(s), set_main(runAsNonRoot=True)(s)),
        [],
        [],
        id="runAsNonRoot-container",
    ),
    pytest.param(set_main(runAsUser=0), [], ["runAsUser=0"], id="runAsUser-0"),
    pytest.param(set_pod(supplementalGroups=[0]), [], [], id="supplementalGroups-0"),
    pytest.param(
        init_container(privileged=True, allowPrivilegeEscalation=None),
        ["privileged"],
        ["privileged", "allowPrivilegeEscalation != false"],
        id="init-container",
    ),
]


@pytest.mark.parametrize(("change", "baseline", "restricted"), CASES)
def test_each_check(
    change: Callable[[Spec], None], baseline: list[str], restricted: list[str]
) -> None:
    spec = pod_spec()
    change(spec)
    assert violations(spec, "privileged") == []
    assert violations(spec, "baseline") == baseline
    assert violations(spec, "restricted") == restricted


def test_apparmor_annotations_are_checked() -> None:
    notes = {"container.apparmor.security.beta.kubernetes.io/probemarker": "unconfined"}
    assert violations(pod_spec(), "baseline", notes) == ["forbidden AppArmor profile"]
    # the field and its annotation, as the API server hands the pod to admission
    spec = pod_spec()
    set_main(appArmorProfile={"type": "Unconfined"})(spec)
    assert violations(spec, "baseline", notes) == ["forbidden AppArmor profiles"]
    notes = {"container.apparmor.security.beta.kubernetes.io/probemarker": "runtime/default"}
    assert violations(pod_spec(), "baseline", notes) == []


def test_the_reasons_are_listed_once_in_check_order() -> None:
    spec = pod_spec()
    spec.update(hostNetwork=True, volumes=[{"name": "h", "hostPath": {"path": "/"}}])
    set_pod(runAsUser=0)(spec)
    set_main(runAsUser=0)(spec)
    assert violations(spec, "restricted") == [
        "host namespaces",
        "restricted volume types",
        "runAsUser=0",
    ]


@pytest.mark.parametrize(
    ("spec", "level"),
    [
        pytest.param({"containers": []}, "strict", id="unknown-level"),
        pytest.param({"os": {"name": "windows"}, "containers": []}, "restricted", id="windows"),
        pytest.param({"hostUsers": False, "containers": []}, "restricted", id="user-namespace"),
    ],
)
def test_what_it_does_not_evaluate_is_an_error(spec: Spec, level: str) -> None:
    with pytest.raises(PodSecurityError):
        violations(spec, level)
