"""manifests/components/cri and cri-no-exec-rbac: what an overlay with them renders.

The cri component changes the DaemonSet by exactly the two settings, the runtime's socket
(one hostPath, `type: Socket`, mounted read-only at the endpoint's own path) and the
supplementary group that reaches it, and nothing else; the namespace enforces the
privileged Pod Security level, warns and audits at restricted, and the pod template
fails restricted (and baseline) for the socket alone (tests/pod_security.py evaluates
the checks as kube-apiserver does). The settings the env resolves to are the daemon's
own. cri-no-exec-rbac removes the pods/exec rule and nothing else, and stops the render
when that rule is not where it expects it. Both compose with node-scope and
kruise-group, and with a `namespace:` of the overlay. The overlays of docs/cri.md
render, and their endpoint and mount agree.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from probemarker.daemon.settings import RunSettings, env_name, parse_run_settings
from tests.manifests.test_manifests import (
    EXPECTED,
    KRUISE_COMPONENT,
    KRUISE_GRANTS,
    KUBECTL,
    MAIN,
    MANIFESTS,
    NAMESPACE,
    POD,
    dig,
    grants,
    identity,
    kustomize,
    render,
    write_overlay,
)
from tests.pod_security import violations
from tests.rbac_check import REPO, rules_of

pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not on PATH (kubectl kustomize)"
)

COMPONENTS = MANIFESTS / "components"
CRI = COMPONENTS / "cri"
NO_EXEC = COMPONENTS / "cri-no-exec-rbac"
NODE_SCOPE = COMPONENTS / "node-scope"
CRI_DOC = REPO / "docs" / "cri.md"

CONTAINERD = "unix:///run/containerd/containerd.sock"
CRIO = "unix:///var/run/crio/crio.sock"
# The settings' variables (docs/configuration.md), as probemarker.daemon.settings names them.
BACKEND_VAR = env_name("exec_backend")
ENDPOINT_VAR = env_name("cri_endpoint")
EXEC_GRANTS = {("", "pods/exec", "get"), ("", "pods/exec", "create")}
PSA = "pod-security.kubernetes.io/"


def the(objects: dict[tuple[str, str], Any], kind: str) -> dict[str, Any]:
    (doc,) = [d for (k, _), d in objects.items() if k == kind]
    return dict(doc)


def env_of(ds: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in dig(ds, MAIN)["env"]}


def socket_mounts(ds: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every hostPath volume of the pod with the main container's mounts of it."""
    pod = dig(ds, POD)
    mounts = dig(ds, MAIN).get("volumeMounts") or []
    found = []
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            for mount in mounts:
                if mount["name"] == volume["name"]:
                    found.append((volume, mount))
    return found


def endpoint_path(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    assert (parts.scheme, parts.netloc) == ("unix", ""), endpoint
    return parts.path


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    return render(tmp_path_factory.mktemp("base"))


@pytest.fixture(scope="module")
def cri(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    return render(tmp_path_factory.mktemp("cri"), CRI)


# -- the files ---------------------------------------------------------------------------


@pytest.mark.parametrize("component", [CRI, NO_EXEC], ids=lambda p: p.name)
def test_each_is_a_kustomize_component_that_says_how_to_include_it(component: Path) -> None:
    text = (component / "kustomization.yaml").read_text()
    body = yaml.safe_load(text)
    assert (body["apiVersion"], body["kind"]) == ("kustomize.config.k8s.io/v1alpha1", "Component")
    assert f"../manifests/components/{component.name}" in text
    assert "docs/" in text  # where the trade-off is explained


# -- the DaemonSet -----------------------------------------------------------------------


def test_only_the_runtime_socket_is_mounted_read_only_at_the_endpoints_path(
    cri: dict[tuple[str, str], Any],
) -> None:
    ds = the(cri, "DaemonSet")
    pod = dig(ds, POD)
    ((volume, mount),) = socket_mounts(ds)
    # no other volume of any kind but the status socket's emptyDir (the base's)
    assert [v for v in pod["volumes"] if v["name"] != "status"] == [volume]
    assert [m for m in dig(ds, MAIN)["volumeMounts"] if m["name"] != "status"] == [mount]
    assert volume["hostPath"] == {"path": endpoint_path(CONTAINERD), "type": "Socket"}
    assert mount == {
        "name": volume["name"],
        "mountPath": volume["hostPath"]["path"],
        "readOnly": True,
    }
    assert endpoint_path(env_of(ds)[ENDPOINT_VAR]) == mount["mountPath"]


# (variable, value): the settings the component sets; names as probemarker.daemon.settings makes them.
CRI_ENV = [
    pytest.param(BACKEND_VAR, "cri", id="exec-backend"),
    pytest.param(ENDPOINT_VAR, CONTAINERD, id="cri-endpoint"),
]


@pytest.mark.parametrize(("name", "value"), CRI_ENV)
def test_the_component_sets(cri: dict[tuple[str, str], Any], name: str, value: str) -> None:
    assert env_of(the(cri, "DaemonSet"))[name] == value


def test_the_variables_are_the_documented_ones() -> None:
    assert (BACKEND_VAR, ENDPOINT_VAR) == ("PROBEMARKER_EXEC_BACKEND", "PROBEMARKER_CRI_ENDPOINT")


def settings_of(ds: dict[str, Any]) -> RunSettings:
    if not hasattr(RunSettings(), "exec_backend"):
        pytest.skip("no exec_backend setting in this checkout yet (issue 17's settings)")
    return parse_run_settings([], env_of(ds) | {"NODE_NAME": "node-a"})


def test_the_env_resolves_to_the_cri_backend_and_the_endpoint(
    cri: dict[tuple[str, str], Any],
) -> None:
    settings = settings_of(the(cri, "DaemonSet"))
    assert getattr(settings, "exec_backend", None) == "cri"
    assert getattr(settings, "cri_endpoint", None) == CONTAINERD


# (path in the DaemonSet, value): what the component keeps as the base has it.
KEPT = [
    pytest.param(f"{POD}.securityContext.runAsNonRoot", True, id="non-root"),
    pytest.param(f"{POD}.securityContext.runAsUser", 65532, id="image-user"),
    pytest.param(f"{POD}.securityContext.runAsGroup", 65532, id="image-group"),
    pytest.param(f"{POD}.securityContext.seccompProfile", {"type": "RuntimeDefault"}, id="seccomp"),
    pytest.param(f"{MAIN}.securityContext.capabilities", {"drop": ["ALL"]}, id="no-capabilities"),
    pytest.param(f"{MAIN}.securityContext.allowPrivilegeEscalation", False, id="no-escalation"),
    pytest.param(f"{MAIN}.securityContext.readOnlyRootFilesystem", True, id="read-only-root"),
    pytest.param(f"{MAIN}.securityContext.privileged", None, id="not-privileged"),
    pytest.param(f"{POD}.hostNetwork", None, id="no-host-network"),
    pytest.param(f"{POD}.hostPID", None, id="no-host-pid"),
    # group 0 (the socket's group by default) among the supplementary groups
    pytest.param(f"{POD}.securityContext.supplementalGroups", [0], id="socket-group"),
]


@pytest.mark.parametrize(("path", "expected"), KEPT)
def test_the_daemonset_holds(cri: dict[tuple[str, str], Any], path: str, expected: Any) -> None:
    assert dig(the(cri, "DaemonSet"), path) == expected


def without_cri_changes(ds: dict[str, Any]) -> dict[str, Any]:
    """`ds` with what the component adds taken out again."""
    out = copy.deepcopy(ds)
    main = dig(out, MAIN)
    main["env"] = [e for e in main["env"] if e["name"] not in (BACKEND_VAR, ENDPOINT_VAR)]
    main["volumeMounts"] = [m for m in main["volumeMounts"] if m["name"] == "status"]
    pod = dig(out, POD)
    pod["volumes"] = [v for v in pod["volumes"] if v["name"] == "status"]
    del dig(out, POD)["securityContext"]["supplementalGroups"]
    return out


def test_nothing_else_changes(
    base: dict[tuple[str, str], Any], cri: dict[tuple[str, str], Any]
) -> None:
    assert sorted(cri) == sorted(base)
    assert without_cri_changes(the(cri, "DaemonSet")) == the(base, "DaemonSet")
    for key, doc in base.items():
        if key[0] not in ("DaemonSet", "Namespace"):
            assert cri[key] == doc, key
    namespace = copy.deepcopy(the(cri, "Namespace"))
    namespace["metadata"]["labels"] = {
        k: v for k, v in namespace["metadata"]["labels"].items() if not k.startswith(PSA)
    }
    plain = copy.deepcopy(the(base, "Namespace"))
    del plain["metadata"]["labels"][PSA + "enforce"]
    assert namespace == plain


# -- Pod Security --------------------------------------------------------------------------


def test_the_namespace_enforces_privileged_and_warns_and_audits_at_restricted(
    cri: dict[tuple[str, str], Any],
) -> None:
    labels = the(cri, "Namespace")["metadata"]["labels"]
    assert {k: v for k, v in labels.items() if k.startswith(PSA)} == {
        PSA + "enforce": "privileged",
        PSA + "warn": "restricted",
        PSA + "audit": "restricted",
    }


def levels(namespace: dict[str, Any]) -> dict[str, str]:
    """enforce, warn, audit: a mode without a label is `privileged` (the default)."""
    labels = namespace["metadata"]["labels"]
    return {mode: labels.get(PSA + mode, "privileged") for mode in ("enforce", "warn", "audit")}


# (overlay components, mode, what Pod Security reports for the daemon's pod template)
PSA_CASES = [
    pytest.param((), "enforce", [], id="base-enforce"),
    pytest.param((), "warn", [], id="base-warn"),
    pytest.param((CRI,), "enforce", [], id="cri-enforce"),
    # The socket, and nothing else, in each warning and audit annotation.
    pytest.param((CRI,), "warn", ["restricted volume types"], id="cri-warn"),
    pytest.param((CRI,), "audit", ["restricted volume types"], id="cri-audit"),
    pytest.param(
        (CRI, NO_EXEC, KRUISE_COMPONENT, NODE_SCOPE),
        "warn",
        ["restricted volume types"],
        id="all-warn",
    ),
]


@pytest.mark.parametrize(("components", "mode", "expected"), PSA_CASES)
def test_pod_security_of_the_daemons_pod_template(
    tmp_path: Path, components: tuple[Path, ...], mode: str, expected: list[str]
) -> None:
    objects = render(tmp_path, *components)
    level = levels(the(objects, "Namespace"))[mode]
    template = dig(the(objects, "DaemonSet"), "spec.template")
    annotations = template["metadata"].get("annotations") or {}
    assert violations(template["spec"], level, annotations) == expected


def test_the_socket_alone_keeps_the_pod_from_baseline(cri: dict[tuple[str, str], Any]) -> None:
    """Why `privileged` and not `baseline`: every hostPath volume fails baseline."""
    spec = dig(the(cri, "DaemonSet"), POD)
    assert violations(spec, "baseline") == ["hostPath volumes"]
    assert (
        violations(
            without_cri_changes(the(cri, "DaemonSet"))["spec"]["template"]["spec"], "restricted"
        )
        == []
    )


# -- without pods/exec -------------------------------------------------------------------


def test_no_exec_rbac_removes_exactly_the_pods_exec_rule(
    tmp_path: Path, base: dict[tuple[str, str], Any]
) -> None:
    objects = render(tmp_path, CRI, NO_EXEC)
    role = the(objects, "ClusterRole")
    plain = the(base, "ClusterRole")
    assert set(grants(rules_of(role))) == EXPECTED - EXEC_GRANTS
    exec_rule = {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get", "create"]}
    assert role["rules"] == [rule for rule in plain["rules"] if rule != exec_rule]
    assert len(role["rules"]) == len(plain["rules"]) - 1
    assert {k: v for k, v in role.items() if k != "rules"} == {
        k: v for k, v in plain.items() if k != "rules"
    }
    assert (
        objects[("ClusterRoleBinding", "probemarker-daemon")]
        == base[("ClusterRoleBinding", "probemarker-daemon")]
    )


def test_no_exec_rbac_stops_the_render_when_the_rule_moved(tmp_path: Path) -> None:
    """A rule inserted before pods/exec (by an overlay, or a later edit of
    clusterrole.yaml): the `test` op fails and kustomize renders nothing, rather than
    remove the rule that is third now."""
    moved = tmp_path / "moved"
    moved.mkdir()
    (moved / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1alpha1",
                "kind": "Component",
                "patches": [
                    {
                        "target": {"kind": "ClusterRole", "name": "probemarker-daemon"},
                        "patch": yaml.safe_dump(
                            [
                                {
                                    "op": "add",
                                    "path": "/rules/0",
                                    "value": {
                                        "apiGroups": [""],
                                        "resources": ["nodes"],
                                        "verbs": ["get"],
                                    },
                                }
                            ]
                        ),
                    }
                ],
            }
        )
    )
    overlay = write_overlay(tmp_path, components=(moved, CRI, NO_EXEC))
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, "kustomize", str(overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "testing value /rules/2 failed" in done.stderr
    assert not done.stdout


# -- composition -------------------------------------------------------------------------

# (components in overlay order, the role's grants)
COMPOSITIONS = [
    pytest.param((CRI, NODE_SCOPE), EXPECTED, id="cri+node-scope"),
    pytest.param((CRI, KRUISE_COMPONENT), EXPECTED | KRUISE_GRANTS, id="cri+kruise"),
    pytest.param(
        (KRUISE_COMPONENT, CRI, NO_EXEC),
        EXPECTED - EXEC_GRANTS | KRUISE_GRANTS,
        id="kruise+cri+no-exec",
    ),
    pytest.param(
        (CRI, NO_EXEC, KRUISE_COMPONENT, NODE_SCOPE),
        EXPECTED - EXEC_GRANTS | KRUISE_GRANTS,
        id="all",
    ),
]


@pytest.mark.parametrize(("components", "expected_grants"), COMPOSITIONS)
def test_the_components_compose(
    tmp_path: Path,
    components: tuple[Path, ...],
    expected_grants: set[tuple[str, str, str]],
) -> None:
    objects = render(tmp_path, *components)
    assert set(grants(rules_of(the(objects, "ClusterRole")))) == expected_grants
    ds = the(objects, "DaemonSet")
    env = env_of(ds)
    assert (env[BACKEND_VAR], env[ENDPOINT_VAR]) == ("cri", CONTAINERD)
    assert len(socket_mounts(ds)) == 1
    if KRUISE_COMPONENT in components:
        assert env["PROBEMARKER_MARKER_GROUP"] == "apps.kruise.io"
    if NODE_SCOPE in components:
        assert ("ValidatingAdmissionPolicy", "probemarker-node-scope") in objects


def test_an_overlay_namespace_moves_the_patched_objects(tmp_path: Path) -> None:
    objects = render(tmp_path, CRI, namespace="ops")
    namespace = the(objects, "Namespace")
    assert namespace["metadata"]["name"] == "ops"
    assert levels(namespace)["enforce"] == "privileged"
    ds = the(objects, "DaemonSet")
    assert ds["metadata"]["namespace"] == "ops"
    assert len(socket_mounts(ds)) == 1
    assert identity(ds)[2] != NAMESPACE


# -- docs/cri.md ---------------------------------------------------------------------------


def doc_overlays() -> list[tuple[str, dict[str, Any]]]:
    """The Kustomizations in docs/cri.md's yaml blocks, each with the comment line
    above it in the block (its name in the test ids)."""
    blocks = re.findall(r"```yaml\n(.*?)```", CRI_DOC.read_text(), flags=re.DOTALL)
    found = []
    for block in blocks:
        doc = yaml.safe_load(block)
        if isinstance(doc, dict) and doc.get("kind") == "Kustomization":
            first = block.splitlines()[0].lstrip("# ").strip()
            found.append((first, doc))
    return found


def render_doc_overlay(tmp_path: Path, overlay: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """`overlay` as docs/cri.md writes it (beside a checkout: `../manifests`), rendered
    against this checkout."""
    here = tmp_path / "doc-overlay"
    here.mkdir()
    real = os.path.relpath(MANIFESTS, here)
    body = dict(overlay)
    body["resources"] = [r.replace("../manifests", real, 1) for r in overlay["resources"]]
    body["components"] = [c.replace("../manifests", real, 1) for c in overlay.get("components", [])]
    (here / "kustomization.yaml").write_text(yaml.safe_dump(body))
    docs = kustomize(here)
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


DOC_OVERLAYS = doc_overlays() if CRI_DOC.exists() else []

# The overlay's first comment line in docs/cri.md -> (endpoint, the hostPath volume,
# supplementalGroups, runAsUser, what `restricted` reports).
SOCKET = {"path": "/run/containerd/containerd.sock", "type": "Socket"}
ONLY_SOCKET = ["restricted volume types"]
DOC_EXPECTED: dict[str, tuple[str, dict[str, str], list[int] | None, int, list[str]]] = {
    "overlay/kustomization.yaml: exec through containerd": (
        CONTAINERD,
        SOCKET,
        [0],
        65532,
        ONLY_SOCKET,
    ),
    "CRI-O: its socket, at the same path inside": (
        CRIO,
        {"path": "/var/run/crio/crio.sock", "type": "Socket"},
        [0],
        65532,
        ONLY_SOCKET,
    ),
    "containerd with [grpc] gid = 2500 in its config": (
        CONTAINERD,
        SOCKET,
        [2500],
        65532,
        ONLY_SOCKET,
    ),
    "as root instead (uid 0 owns the socket; still no capability)": (
        CONTAINERD,
        SOCKET,
        None,
        0,
        [*ONLY_SOCKET, "runAsNonRoot != true", "runAsUser=0"],
    ),
    "the directory instead of the socket (survives containerd restarts, shows more)": (
        CONTAINERD,
        {"path": "/run/containerd", "type": "Directory"},
        [0],
        65532,
        ONLY_SOCKET,
    ),
}


def test_the_doc_shows_every_overlay_this_file_checks() -> None:
    assert sorted(name for name, _ in DOC_OVERLAYS) == sorted(DOC_EXPECTED)


def reaches(mount_path: str, socket: str) -> bool:
    """Is `socket` (a path in the container) the mount itself or inside it?"""
    return socket == mount_path or socket.startswith(mount_path.rstrip("/") + "/")


@pytest.mark.parametrize(
    ("name", "overlay"), [pytest.param(n, o, id=n.split(":")[0][:40]) for n, o in DOC_OVERLAYS]
)
def test_the_overlays_in_the_doc_render(tmp_path: Path, name: str, overlay: dict[str, Any]) -> None:
    endpoint, host_path, groups, user, restricted = DOC_EXPECTED[name]
    objects = render_doc_overlay(tmp_path, overlay)
    ds = the(objects, "DaemonSet")
    env = env_of(ds)
    assert (env[BACKEND_VAR], env[ENDPOINT_VAR]) == ("cri", endpoint)
    ((volume, mount),) = socket_mounts(ds)
    # beside the base's status socket emptyDir, nothing else
    assert [v for v in dig(ds, POD)["volumes"] if v["name"] != "status"] == [volume]
    assert [m for m in dig(ds, MAIN)["volumeMounts"] if m["name"] != "status"] == [mount]
    assert volume["hostPath"] == host_path
    # the same path on the node and in the container, read-only, and the endpoint in it
    assert (mount["mountPath"], mount["readOnly"]) == (host_path["path"], True)
    assert reaches(mount["mountPath"], endpoint_path(endpoint))
    assert dig(ds, f"{POD}.securityContext.supplementalGroups") == groups
    assert dig(ds, f"{POD}.securityContext.runAsUser") == user
    assert dig(ds, f"{MAIN}.securityContext.capabilities") == {"drop": ["ALL"]}
    spec = dig(ds, POD)
    assert violations(spec, levels(the(objects, "Namespace"))["enforce"]) == []
    assert violations(spec, "restricted") == restricted


def test_the_doc_overlays_resolve_to_the_settings_they_name(tmp_path: Path) -> None:
    for i, (name, overlay) in enumerate(DOC_OVERLAYS):
        here = tmp_path / str(i)
        here.mkdir()
        settings = settings_of(the(render_doc_overlay(here, overlay), "DaemonSet"))
        assert getattr(settings, "cri_endpoint", None) == DOC_EXPECTED[name][0], name
