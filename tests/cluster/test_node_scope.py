"""The node-scope component with the kubelet's own projected token.

The daemon's pod gets its ServiceAccount token from the kubelet (a projected volume,
bound to the pod and, on 1.32, to the node). With that very token: a write the daemon
makes (a label on a pod of its node, through pods/status) passes, and what the
ValidatingAdmissionPolicy forbids is denied: a pod of another node, a key under
`kubernetes.io/`, a reserved condition type, a change to anything but labels,
annotations and conditions.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request

import pytest

from tests.cluster.install import NODE_SCOPE_MINOR, Addon, Cluster, needs_release
from tests.cluster.kube import busybox_pod, pod_ready

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module", autouse=True)
def _release(cluster: Cluster) -> None:
    """Module-scoped: before the module's own fixtures install anything."""
    needs_release(cluster, NODE_SCOPE_MINOR, "the node-scope component (the token's node name)")


def _token(cluster: Cluster, uid: str) -> str:
    volumes = (
        cluster.state / "kubelet" / "root" / "pods" / uid / "volumes" / "kubernetes.io~projected"
    )
    (token,) = list(volumes.glob("kube-api-access-*/token"))
    return token.read_text()


def _patch_status(
    cluster: Cluster, token: str, namespace: str, pod: str, patch: dict[str, object]
) -> tuple[int, str]:
    """PATCH pods/status as the daemon does (a merge patch here): its RBAC grants
    `patch`, not `get`, so kubectl's patch (which reads first) cannot be used."""
    config = cluster.kubectl.json("config", "view", "--raw", "--minify")
    server = config["clusters"][0]["cluster"]["server"]
    context = ssl.create_default_context(cafile=str(cluster.state / "pki" / "ca.crt"))
    request = urllib.request.Request(
        f"{server}/api/v1/namespaces/{namespace}/pods/{pod}/status",
        data=json.dumps(patch).encode(),
        method="PATCH",
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/merge-patch+json",
        },
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_the_daemons_own_token_may_write_what_the_daemon_writes_and_nothing_else(
    cluster: Cluster, addon: Addon, namespace: str
) -> None:
    kubectl = cluster.kubectl
    daemon = addon.daemon_pod()
    token = _token(cluster, str(daemon["metadata"]["uid"]))
    here = busybox_pod("here", namespace, script="exec sleep 2147483647", labels={"app": "x"})
    elsewhere = busybox_pod("elsewhere", namespace, script="exec sleep 2147483647", labels={"app": "x"},
                            spec={"nodeName": "another-node"})  # fmt: skip
    kubectl.apply(here, elsewhere)
    pod_ready(kubectl, namespace, "here")

    status, said = _patch_status(
        cluster, token, namespace, "here", {"metadata": {"labels": {"probe": "ok"}}}
    )
    assert status == 200, said
    assert kubectl.get("pod", "here", namespace)["metadata"]["labels"]["probe"] == "ok"

    hostile = {
        "a pod of another node": ("elsewhere", {"metadata": {"labels": {"probe": "ok"}}}),
        "a kubernetes.io/ key": ("here", {"metadata": {"labels": {"kubernetes.io/role": "x"}}}),
        "a reserved condition": (
            "here",
            {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
        ),
        "a change of the pod's status beyond conditions": ("here", {"status": {"message": "x"}}),
    }
    for what, (pod, patch) in hostile.items():
        status, said = _patch_status(cluster, token, namespace, pod, patch)
        assert status == 403, f"{what}: {status} {said}"
        assert "probemarker-node-scope" in said, f"{what}: {said}"
    assert "kubernetes.io/role" not in kubectl.get("pod", "here", namespace)["metadata"]["labels"]


def test_the_token_names_the_node(cluster: Cluster, addon: Addon) -> None:
    """1.32 binds the node into the token (the policy reads it from the user's extra)."""
    daemon = addon.daemon_pod()
    token = _token(cluster, str(daemon["metadata"]["uid"]))
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["kubernetes.io"]["node"]["name"] == daemon["spec"]["nodeName"]
    assert claims["kubernetes.io"]["pod"]["uid"] == daemon["metadata"]["uid"]
