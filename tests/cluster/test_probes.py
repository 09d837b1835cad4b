"""Every probe kind on real pods of a real node: the label follows the container.

Each test makes a pod, a marker with one probe (period 1 s, thresholds 1) writing
`probe=ok` or `probe=bad`, then turns what the probe checks off and on again inside
the container (`kubectl exec`), and waits for the label to follow each way. exec runs
on both backends (through the API server, and through containerd's CRI socket with
the `cri` component); httpGet and tcpSocket go to the pod's IP on the CNI bridge; gRPC
asks a health server that a pod of the project's own image serves (it has grpcio and
grpcio-health-checking).
"""

from __future__ import annotations

from typing import Any

import pytest

from probemarker import __version__
from tests.cluster.install import IMAGE_NAME, Addon, Cluster
from tests.cluster.kube import busybox_pod, exec_in, marker, pod_ready, wait_label
from tests.podfields import condition

pytestmark = pytest.mark.timeout(600)

HTTPD = "mkdir -p /www && echo ok >/www/ok && httpd -p 8080 -h /www && exec sleep 2147483647"

GRPC_SERVER = """
import os, time
from concurrent import futures
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
servicer = health.HealthServicer()
health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
server.add_insecure_port("0.0.0.0:9090")
server.start()
status = health_pb2.HealthCheckResponse
while True:
    servicer.set("", status.SERVING if os.path.exists("/tmp/serving") else status.NOT_SERVING)
    time.sleep(0.2)
"""


def _flip(cluster: Cluster, ns: str, pod: str, off: list[str], on: list[str]) -> None:
    kubectl = cluster.kubectl
    wait_label(kubectl, ns, pod, "probe", "ok")
    exec_in(kubectl, ns, pod, *off)
    wait_label(kubectl, ns, pod, "probe", "bad")
    exec_in(kubectl, ns, pod, *on)
    wait_label(kubectl, ns, pod, "probe", "ok")


@pytest.mark.parametrize(
    "backend", ["cri", "api"]
)  # cri first: the suite ends the module before in cri
def test_exec_follows_the_container_on_each_backend(
    cluster: Cluster, addon: Addon, namespace: str, backend: str
) -> None:
    addon.use(backend)
    kubectl = cluster.kubectl
    kubectl.apply(
        busybox_pod(
            "ex", namespace, script="touch /tmp/ok && exec sleep 2147483647", labels={"app": "ex"}
        ),
        marker("ex", namespace, app="ex", probe={"exec": {"command": ["cat", "/tmp/ok"]}}),
    )
    pod_ready(kubectl, namespace, "ex")
    _flip(cluster, namespace, "ex", ["rm", "/tmp/ok"], ["touch", "/tmp/ok"])


def test_http_get_on_the_pod_ip(cluster: Cluster, addon: Addon, namespace: str) -> None:
    kubectl = cluster.kubectl
    kubectl.apply(
        busybox_pod("web", namespace, script=HTTPD, labels={"app": "web"}),
        marker(
            "web",
            namespace,
            app="web",
            probe={"httpGet": {"path": "/ok", "port": 8080}},
            condition_type="probemarker.test/web",
        ),
    )
    pod_ready(kubectl, namespace, "web")
    _flip(cluster, namespace, "web", ["rm", "/www/ok"], ["sh", "-c", "echo ok >/www/ok"])
    # busybox answers a missing file with an HTML page: the condition says what the
    # kubelet would, not the page
    exec_in(kubectl, namespace, "web", "rm", "/www/ok")
    pod = wait_label(kubectl, namespace, "web", "probe", "bad")
    message = (condition(pod, "probemarker.test/web") or {}).get("message", "")
    assert message.startswith("HTTP probe failed with statuscode: 404"), message
    assert "\n" not in message, message
    assert "<HTML>" not in message.upper(), message


def test_tcp_socket_on_the_pod_ip(cluster: Cluster, addon: Addon, namespace: str) -> None:
    kubectl = cluster.kubectl
    kubectl.apply(
        busybox_pod("tcp", namespace, script=HTTPD, labels={"app": "tcp"}),
        marker("tcp", namespace, app="tcp", probe={"tcpSocket": {"port": 8080}}),
    )
    pod_ready(kubectl, namespace, "tcp")
    _flip(cluster, namespace, "tcp", ["killall", "httpd"], ["httpd", "-p", "8080", "-h", "/www"])


def test_grpc_health_of_a_pod_of_the_project_image(
    cluster: Cluster, addon: Addon, namespace: str
) -> None:
    kubectl = cluster.kubectl
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "rpc", "namespace": namespace, "labels": {"app": "rpc"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main",
                "image": f"{IMAGE_NAME}:{__version__}",
                "imagePullPolicy": "Never",
                "command": ["/opt/probemarker/bin/python", "-c", GRPC_SERVER],
            }],
        },
    }  # fmt: skip
    kubectl.apply(pod, marker("rpc", namespace, app="rpc", probe={"grpc": {"port": 9090}}))
    pod_ready(kubectl, namespace, "rpc")
    exec_in(kubectl, namespace, "rpc", "touch", "/tmp/serving")
    _flip(cluster, namespace, "rpc", ["rm", "/tmp/serving"], ["touch", "/tmp/serving"])
