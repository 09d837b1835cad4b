"""kubectl against the sim: it must not be able to tell the sim from a real API server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import yaml

from probemarker.sim import SimCluster
from probemarker.sim.server.discovery.catalog import EVENTS, PODS
from tests.sim.server_helpers import HAVE_KUBECTL, KUBECTL, Result, raw, run_kubectl
from tests.sim.test_server_crd import PROJECT_CRD, WIDGET_CRD

pytestmark = pytest.mark.skipif(
    not HAVE_KUBECTL, reason="kubectl is not installed (/usr/bin/kubectl)"
)

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: web-0
  labels: {app: web}
spec:
  nodeName: node-1
  containers:
  - name: web
    image: nginx:1.27
    env: [{name: GREETING, value: hello}]
"""


Kubectl = Callable[..., Awaitable[Result]]


@pytest.fixture
def kubectl(sim: SimCluster, tmp_path: Path) -> Kubectl:
    async def run(*args: str, stdin: str | None = None, within: float = 30) -> Result:
        return await run_kubectl(
            sim.kubeconfig_path,
            *args,
            cache_dir=tmp_path / "kube-cache",
            stdin=stdin,
            within=within,
        )

    return run


async def test_version_and_get(kubectl: Kubectl) -> None:
    version = await kubectl("version", "-o", "yaml")
    assert version.code == 0, version.err
    server = yaml.safe_load(version.out)["serverVersion"]
    assert int(server["minor"]) >= 32
    nodes = await kubectl("get", "nodes", "-o", "name")
    assert nodes.out.split() == ["node/node-1", "node/node-2"]
    namespaces = await kubectl("get", "ns")
    assert namespaces.code == 0, namespaces.err
    assert "default" in namespaces.out


async def test_create_get_selectors_and_namespace(sim: SimCluster, kubectl: Kubectl) -> None:
    created = await kubectl("create", "-f", "-", stdin=POD)
    assert created.code == 0, created.err
    assert created.out.strip() == "pod/web-0 created"
    await sim.kubelet.wait_running("default", "web-0")
    table = await kubectl("get", "pods", "-o", "wide")
    header, row = table.out.splitlines()
    assert header.split()[:5] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:4] == ["web-0", "1/1", "Running", "0"]
    assert sim.kubelet.pod_ip("default", "web-0") in row
    by_label = await kubectl("get", "pods", "-l", "app=web", "-o", "name")
    assert by_label.out.split() == ["pod/web-0"]
    by_field = await kubectl(
        "get", "pods", "--field-selector", "status.phase=Running", "-o", "name"
    )
    assert by_field.out.split() == ["pod/web-0"]
    none = await kubectl("get", "pods", "-l", "app!=web", "-o", "name")
    assert none.out.strip() == ""
    ns = await kubectl("create", "namespace", "team")
    assert ns.code == 0, ns.err
    assert (await kubectl("get", "ns", "team", "-o", "name")).out.strip() == "namespace/team"


async def test_apply_label_and_every_patch_type(sim: SimCluster, kubectl: Kubectl) -> None:
    assert (await kubectl("apply", "-f", "-", stdin=POD)).code == 0
    again = await kubectl("apply", "-f", "-", stdin=POD)
    assert again.code == 0, again.err
    await sim.kubelet.wait_running("default", "web-0")
    assert (await kubectl("label", "pod", "web-0", "l=1")).code == 0
    for patch_type, patch in (
        ("json", '[{"op":"add","path":"/metadata/labels/j","value":"1"}]'),
        ("merge", '{"metadata":{"labels":{"m":"1"}}}'),
        ("strategic", '{"metadata":{"labels":{"s":"1"}}}'),
    ):
        result = await kubectl("patch", "pod", "web-0", "--type", patch_type, "-p", patch)
        assert result.code == 0, result.err
    status = await kubectl(
        "patch",
        "pod",
        "web-0",
        "--subresource=status",
        "--type=json",
        "-p",
        '[{"op":"add","path":"/status/conditions/-","value":{"type":"x.io/a","status":"True"}}]',
    )
    assert status.code == 0, status.err
    pod = sim.store.get(PODS, "default", "web-0")
    assert {"l", "j", "m", "s"} <= set(pod["metadata"]["labels"])
    assert "x.io/a" in [c["type"] for c in pod["status"]["conditions"]]


async def test_describe_pod_shows_events(sim: SimCluster, kubectl: Kubectl) -> None:
    assert (await kubectl("create", "-f", "-", stdin=POD)).code == 0
    await sim.kubelet.wait_running("default", "web-0")
    pod = sim.store.get(PODS, "default", "web-0")
    sim.store.create(
        EVENTS,
        {
            "metadata": {"name": "web-0.probe"},
            "involvedObject": {
                "kind": "Pod",
                "namespace": "default",
                "name": "web-0",
                "uid": pod["metadata"]["uid"],
                "apiVersion": "v1",
            },
            "reason": "ProbeFailed",
            "message": "upstream unreachable",
            "type": "Warning",
            "source": {"component": "probemarker"},
            "count": 1,
            "firstTimestamp": pod["metadata"]["creationTimestamp"],
            "lastTimestamp": pod["metadata"]["creationTimestamp"],
        },
        namespace="default",
    )
    described = await kubectl("describe", "pod", "web-0")
    assert described.code == 0, described.err
    assert "Status:           Running" in described.out
    assert "Started container web" in described.out
    assert "upstream unreachable" in described.out
    assert "ProbeFailed" in described.out


async def test_exec_over_websocket(sim: SimCluster, kubectl: Kubectl) -> None:
    assert (await kubectl("create", "-f", "-", stdin=POD)).code == 0
    await sim.kubelet.wait_running("default", "web-0")
    echoed = await kubectl("exec", "web-0", "--", "sh", "-c", 'echo "$GREETING"; echo oops >&2')
    assert echoed.code == 0, echoed.err
    assert echoed.out == "hello\n"
    assert "oops" in echoed.err
    failed = await kubectl("exec", "web-0", "--", "sh", "-c", "exit 3")
    assert failed.code == 3
    piped = await kubectl("exec", "-i", "web-0", "--", "cat", stdin="from stdin\n")
    assert piped.out == "from stdin\n"
    wrong = await kubectl("exec", "web-0", "-c", "nope", "--", "true")
    assert wrong.code != 0
    assert "container nope is not valid for pod web-0" in wrong.err


async def test_crd_then_invalid_custom_resource(kubectl: Kubectl) -> None:
    applied = await kubectl("apply", "-f", "-", stdin=yaml.safe_dump(WIDGET_CRD))
    assert applied.code == 0, applied.err
    good = "apiVersion: example.io/v1\nkind: Widget\nmetadata: {name: ok}\nspec: {size: 2}\n"
    assert (await kubectl("apply", "-f", "-", stdin=good)).code == 0
    listed = await kubectl("get", "wd", "-o", "name")
    assert listed.out.split() == ["widget.example.io/ok"]
    bad = good.replace("name: ok", "name: big").replace("size: 2", "size: 11")
    refused = await kubectl("apply", "-f", "-", stdin=bad)
    assert refused.code != 0
    assert 'The Widget "big" is invalid' in refused.err
    assert "size must be at most 10" in refused.err


@pytest.mark.skipif(not PROJECT_CRD.exists(), reason="project CRD not written yet")
async def test_project_crd_applies(kubectl: Kubectl) -> None:
    applied = await kubectl("apply", "-f", str(PROJECT_CRD))
    assert applied.code == 0, applied.err
    established = await kubectl(
        "wait", "--for=condition=Established", "--timeout=10s", "crd/podprobemarkers.probemarker.io"
    )
    assert established.code == 0, established.err
    listed = await kubectl("get", "podprobemarkers", "-A")
    assert listed.code == 0, listed.err
    assert listed.err.strip() == "No resources found"


@pytest.mark.skipif(not PROJECT_CRD.exists(), reason="project CRD not written yet")
async def test_explain_reads_the_crd_schema(sim: SimCluster, kubectl: Kubectl) -> None:
    # The CRD is created through the API: client-go's shortcut expander resolves "ppm" from
    # kubectl's discovery cache without refreshing it, so after a `kubectl apply` of the CRD
    # in an earlier kubectl process the first `kubectl explain ppm` fails against a real
    # server too (kubernetes/kubernetes#65517).
    crd = yaml.safe_load(PROJECT_CRD.read_text())
    status, _ = await raw(
        sim, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd
    )
    assert status == 201
    explained = await kubectl("explain", "ppm.spec.probes.probe.periodSeconds")
    assert explained.code == 0, explained.err
    assert "KIND:       PodProbeMarker" in explained.out
    assert "FIELD: periodSeconds <integer>" in explained.out
    assert "Seconds between probe runs." in explained.out
    pods = await kubectl("explain", "pods")
    assert pods.code == 0, pods.err
    assert "KIND:       Pod" in pods.out


async def test_delete_pod_waits_for_kubelet(sim: SimCluster, kubectl: Kubectl) -> None:
    assert (await kubectl("create", "-f", "-", stdin=POD)).code == 0
    await sim.kubelet.wait_running("default", "web-0")
    deleted = await kubectl("delete", "pod", "web-0", "--grace-period=1")
    assert deleted.code == 0, deleted.err
    assert 'pod "web-0" deleted' in deleted.out
    gone = await kubectl("get", "pod", "web-0")
    assert gone.code != 0
    assert 'pods "web-0" not found' in gone.err


async def test_https_and_bearer_token(tmp_path: Path) -> None:
    async with SimCluster(https=True, token="s3cret") as sim:
        cache = tmp_path / "cache"
        ok = await run_kubectl(
            sim.kubeconfig_path, "get", "ns", "default", "-o", "name", cache_dir=cache
        )
        assert ok.code == 0, ok.err
        assert ok.out.strip() == "namespace/default"
        sim.store.create(
            PODS,
            {
                "metadata": {"name": "s"},
                "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]},
            },
            namespace="default",
        )
        await sim.kubelet.wait_running("default", "s")
        exec_ = await run_kubectl(
            sim.kubeconfig_path, "exec", "s", "--", "echo", "secure", cache_dir=cache
        )
        assert exec_.code == 0, exec_.err
        assert exec_.out == "secure\n"
        denied = await run_kubectl(
            sim.kubeconfig_path, "--token", "wrong", "get", "ns", cache_dir=cache
        )
        assert denied.code != 0
        assert "Unauthorized" in denied.err or "must be logged in" in denied.err


async def test_kubectl_strict_validation_and_server_dry_run(kubectl: Kubectl) -> None:
    assert (await kubectl("apply", "-f", "-", stdin=yaml.safe_dump(WIDGET_CRD))).code == 0
    typo = (
        "apiVersion: example.io/v1\nkind: Widget\nmetadata: {name: t}\nspec: {size: 2, szie: 3}\n"
    )
    refused = await kubectl("create", "-f", "-", stdin=typo)
    assert refused.code != 0
    assert 'unknown field "spec.szie"' in refused.err
    good = typo.replace(", szie: 3", "")
    dry = await kubectl("create", "--dry-run=server", "-f", "-", stdin=good)
    assert dry.code == 0, dry.err
    assert "(server dry run)" in dry.out
    assert (await kubectl("get", "widgets", "-o", "name")).out.strip() == ""


async def test_get_watch_streams_changes(sim: SimCluster, tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(sim.kubeconfig_path),
        "--cache-dir",
        str(tmp_path / "c"),
        "get",
        "pods",
        "--watch",
        "-o",
        "name",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(20):
            await sim.accounting.wait_for(verb="watch", resource="pods", within=20)
            sim.store.create(
                PODS,
                {
                    "metadata": {"name": "watched"},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
                namespace="default",
            )
            line = (await process.stdout.readline()).decode().split()
        assert line == ["pod/watched"]
    finally:
        process.kill()
        await process.wait()
