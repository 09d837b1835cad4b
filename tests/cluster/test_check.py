"""`probemarker check` against the real cluster, as the admin: an exec probe through
pods/exec and an httpGet through the API server's pod proxy, and nothing written.

The marker is a file, never applied: no daemon probes the pod, so whatever changes on
it could only be check's doing. The admin's writes are not in the audit log
(`hack/cluster.sh` records only the add-on's), so "nothing written" is read from the
pod itself: its resourceVersion, labels, annotations and conditions, and the
namespace's events.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.cluster.install import Cluster
from tests.cluster.kube import busybox_pod, marker, pod_ready

pytestmark = pytest.mark.timeout(300)

HTTPD = (
    "touch /tmp/ok && mkdir -p /www && echo all good >/www/ok && httpd -p 8080 -h /www "
    "&& exec sleep 2147483647"
)


def test_check_runs_exec_and_a_proxied_http_get_and_writes_nothing(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    kubectl = cluster.kubectl
    kubectl.apply(busybox_pod("chk", namespace, script=HTTPD, labels={"app": "chk"}))
    before = pod_ready(kubectl, namespace, "chk")
    body = marker("chk", namespace, app="chk", probe={"exec": {"command": ["cat", "/tmp/ok"]}})
    web = dict(body["spec"]["probes"][0], name="web")
    web["probe"] = {**web["probe"], "httpGet": {"path": "/ok", "port": 8080}}
    del web["probe"]["exec"]
    body["spec"]["probes"].append(web)
    path = tmp_path / "marker.yaml"
    path.write_text(yaml.safe_dump(body))
    events = len(kubectl.json("get", "events", "-n", namespace)["items"])

    done = subprocess.run(
        [sys.executable, "-m", "probemarker", "check", "-f", str(path), "--via-api-proxy",
         "--kubeconfig", str(kubectl.kubeconfig), "-o", "json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    [pod] = report["pods"]
    got = {p["probe"]: (p["status"], p["via"], p["message"]) for p in pod["probes"]}
    assert got == {
        "p": ("Succeeded", "pods/exec", ""),
        "web": ("Succeeded", "the API server's pod proxy", "all good"),
    }
    assert {"op": "add", "path": "/metadata/labels/probe", "value": "ok"} in pod["patch"]
    after = kubectl.get("pod", "chk", namespace)
    for part in ("resourceVersion", "labels", "annotations"):
        assert after["metadata"].get(part) == before["metadata"].get(part), part
    assert after["status"].get("conditions") == before["status"].get("conditions")
    assert len(kubectl.json("get", "events", "-n", namespace)["items"]) == events
