"""The chart of charts/probemarker/ on the real cluster, as docs/installation.md's Helm
section tells users: `helm install` into a namespace created and labelled by hand,
a marker that labels a pod, a `helm upgrade` that rolls the DaemonSet without a flip
or a pod write, and a `helm uninstall` that leaves no daemon, RBAC or policy behind,
only the CRD (helm.sh/resource-policy: keep).

The chart's object names are the kustomize install's: the module first removes that
install when there is one (conftest's `addon`, or one left on a kept cluster) and resets
the suite's Addons so a later test installs again; it leaves no release behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probemarker import __version__
from tests.cluster.install import ADDONS, IMAGE_NAME, NODE_SCOPE_MINOR, Cluster, overlay
from tests.cluster.kube import (
    DAEMON_NAMESPACE,
    Kubectl,
    Watch,
    busybox_pod,
    create_namespace,
    exec_in,
    marker,
    pod_ready,
    wait_for,
    wait_label,
)
from tests.helm import CHART, require_helm
from tests.podfields import condition, labels_of

RELEASE = "probemarker"
KIND = "probemarker.test/helm"
CRD = "podprobemarkers.probemarker.io"
DAEMON_LABEL = "app.kubernetes.io/name=probemarker"
POLICY = "probemarker-node-scope"
# (kind, name, namespace) of what the chart installs, the CRD aside
CHART_OBJECTS = (
    ("serviceaccount", "probemarker", DAEMON_NAMESPACE),
    ("clusterrole", "probemarker-daemon", None),
    ("clusterrolebinding", "probemarker-daemon", None),
    ("daemonset", "probemarker", DAEMON_NAMESPACE),
    ("validatingadmissionpolicy", POLICY, None),
    ("validatingadmissionpolicybinding", POLICY, None),
)


class Helm:
    """helm against the cluster, with a state folder of its own (no user's config)."""

    def __init__(self, path: str, cluster: Cluster, home: Path) -> None:
        self.path = path
        self.env = {
            **os.environ,
            "KUBECONFIG": str(cluster.kubectl.kubeconfig),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.path, *args, "--namespace", DAEMON_NAMESPACE],
            capture_output=True, text=True, timeout=180, check=False, env=self.env,
        )  # fmt: skip
        if check:
            assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr.strip()}"
        return done

    def installed(self) -> bool:
        done = self.run("status", RELEASE, check=False)
        return done.returncode == 0


def _present(kubectl: Kubectl, kind: str, name: str, namespace: str | None) -> bool:
    """Whether the object exists; a kind the API server does not serve (the policies
    before 1.30 without their feature gate) has none."""
    where = ["-n", namespace] if namespace else []
    done = kubectl.run("get", kind, name, *where, "--ignore-not-found", "-o", "name", check=False)
    if done.returncode != 0 and "the server doesn't have a resource type" in done.stderr:
        return False
    assert done.returncode == 0, done.stderr
    return bool(done.stdout.strip())


def _daemon_pods(kubectl: Kubectl) -> list[dict[str, Any]]:
    done = kubectl.run(
        "-n", DAEMON_NAMESPACE, "get", "pods", "-l", DAEMON_LABEL, "-o", "json", check=False
    )
    if done.returncode != 0 and "NotFound" in done.stderr:
        return []
    assert done.returncode == 0, done.stderr
    items: list[dict[str, Any]] = json.loads(done.stdout)["items"]
    return items


def _no_daemon(kubectl: Kubectl) -> None:
    wait_for(
        lambda: [p["metadata"]["name"] for p in _daemon_pods(kubectl)],
        lambda names: names == [],
        timeout=120,
        what="no daemon pod",
    )


def _namespace_gone(kubectl: Kubectl) -> None:
    kubectl.run("delete", "namespace", DAEMON_NAMESPACE, "--ignore-not-found", "--wait=true",
                timeout=180)  # fmt: skip


def _remove_kustomize_install(cluster: Cluster, folder: Path) -> None:
    """`kubectl delete -k` of the suite's overlay(s): conftest's `addon`, or, for what a
    kept cluster holds, a fresh overlay of the same objects; then reset the Addons."""
    kubectl = cluster.kubectl
    folders = [a.folder for a in ADDONS if a.backend]
    helm_owned = False
    if _present(kubectl, "clusterrole", "probemarker-daemon", None):
        role = kubectl.get("clusterrole", "probemarker-daemon")
        annotations = role["metadata"].get("annotations") or {}
        helm_owned = "meta.helm.sh/release-name" in annotations
        if not helm_owned and not folders:
            node_scope = cluster.minor() >= NODE_SCOPE_MINOR
            (folder / "kustomization.yaml").write_text(
                overlay(folder, "api", cluster.socket(), node_scope=node_scope)
            )
            folders.append(folder)
    for each in folders:
        kubectl.run("delete", "-k", str(each), "--ignore-not-found", "--wait=true", timeout=240)
    for addon in ADDONS:
        addon.backend = ""
    if not helm_owned:
        _no_daemon(kubectl)
        _namespace_gone(kubectl)


@pytest.fixture(scope="module")
def helm(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    """helm, with the kustomize install gone before and no release left after."""
    path = require_helm()
    tool = Helm(path, cluster, tmp_path_factory.mktemp("helm-home"))
    _remove_kustomize_install(cluster, tmp_path_factory.mktemp("kustomize-overlay"))
    if tool.installed():  # a release a kept cluster held
        tool.run("uninstall", RELEASE, "--wait")
        _no_daemon(cluster.kubectl)
        _namespace_gone(cluster.kubectl)
    try:
        yield tool
    finally:
        if tool.installed():
            tool.run("uninstall", RELEASE, "--wait", check=False)
        _no_daemon(cluster.kubectl)
        _namespace_gone(cluster.kubectl)
        for addon in ADDONS:
            addon.backend = ""


def _rolled_out(kubectl: Kubectl) -> None:
    kubectl.run("-n", DAEMON_NAMESPACE, "rollout", "status", "daemonset/probemarker",
                "--timeout=180s", timeout=190)  # fmt: skip


def _marked(kubectl: Kubectl, namespace: str, name: str) -> None:
    wait_for(
        lambda: kubectl.get("pod", name, namespace),
        lambda pod: (
            labels_of(pod).get("probe") == "ok"
            and (condition(pod, KIND) or {}).get("status") == "True"
        ),
        timeout=60,
        what=f"pod {name} marked ok",
    )


@pytest.mark.timeout(900)
def test_helm_install_upgrade_uninstall(cluster: Cluster, helm: Helm, namespace: str) -> None:
    kubectl = cluster.kubectl
    node_scope = cluster.minor() >= NODE_SCOPE_MINOR
    # The namespace, created and labelled as docs/installation.md says.
    create_namespace(kubectl, DAEMON_NAMESPACE)
    kubectl.run("label", "namespace", DAEMON_NAMESPACE,
                "pod-security.kubernetes.io/enforce=restricted")  # fmt: skip
    values = [
        "--set", f"image.repository={IMAGE_NAME}",
        "--set", f"image.tag={__version__}",
        "--set", "image.pullPolicy=Never",
        "--set", f"nodeScope.enabled={'true' if node_scope else 'false'}",
    ]  # fmt: skip
    helm.run("install", RELEASE, str(CHART), *values)
    _rolled_out(kubectl)
    kubectl.run("wait", f"crd/{CRD}", "--for", "condition=established", "--timeout=60s")
    for kind, name, where in CHART_OBJECTS:
        if kind.startswith("validating"):
            assert _present(kubectl, kind, name, where) == node_scope, (kind, node_scope)
        else:
            assert _present(kubectl, kind, name, where), kind

    # A marker labels a busybox pod.
    script = "touch /tmp/ok && exec sleep 2147483647"
    kubectl.apply(
        busybox_pod("t-0", namespace, script=script, labels={"app": "t"}),
        marker("helm", namespace, app="t", probe={"exec": {"command": ["cat", "/tmp/ok"]}},
               condition_type=KIND),
    )  # fmt: skip
    pod_ready(kubectl, namespace, "t-0")
    _marked(kubectl, namespace, "t-0")
    before = {p["metadata"]["uid"] for p in _daemon_pods(kubectl)}

    # helm upgrade with a changed value rolls the DaemonSet: no flip, no pod write.
    mark = cluster.audit.mark()
    started = time.monotonic()
    with Watch(kubectl, f"/api/v1/namespaces/{namespace}/pods") as watch:
        helm.run("upgrade", RELEASE, str(CHART), *values,
                 "--set", f"podAnnotations.probemarker\\.test/upgrade=u{int(started)}",
                 "--set", "extraEnv[0].name=PROBEMARKER_CLEANUP_DELAY_SECONDS",
                 "--set-string", "extraEnv[0].value=31")  # fmt: skip
        _rolled_out(kubectl)
        time.sleep(3)  # probes run every second: a steady state is a span of time
    took = time.monotonic() - started
    after = _daemon_pods(kubectl)
    assert after, "no daemon pod after the upgrade"
    assert not {p["metadata"]["uid"] for p in after} & before, "no rollout"
    env = after[0]["spec"]["containers"][0].get("env") or []
    assert {"name": "PROBEMARKER_CLEANUP_DELAY_SECONDS", "value": "31"} in env
    seen = {
        (labels_of(pod).get("probe"), (condition(pod, KIND) or {}).get("status"))
        for _, pod in watch.seen
        if pod["metadata"]["name"] == "t-0"
    }
    assert seen == {("ok", "True")}, f"flips during the upgrade ({took:.1f} s): {seen}"
    writes = cluster.audit.daemon_writes(mark, namespace=namespace)
    assert writes == [], [w.get("requestURI") for w in writes]
    # and the upgraded daemon works
    exec_in(kubectl, namespace, "t-0", "rm", "/tmp/ok")
    wait_label(kubectl, namespace, "t-0", "probe", "bad", timeout=60)
    exec_in(kubectl, namespace, "t-0", "touch", "/tmp/ok")
    wait_label(kubectl, namespace, "t-0", "probe", "ok", timeout=60)
    kubectl.run("-n", namespace, "delete", "podprobemarker", "helm", "--wait=true")

    # helm uninstall: no daemon, RBAC or policy left; the CRD kept.
    helm.run("uninstall", RELEASE, "--wait")
    _no_daemon(kubectl)
    for kind, name, where in CHART_OBJECTS:
        assert not _present(kubectl, kind, name, where), f"{kind} {name} left by helm uninstall"
    crd = kubectl.get("crd", CRD)
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert not crd["metadata"].get("deletionTimestamp")
