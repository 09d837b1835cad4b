"""Figures for the readiness-gates component on the real single-node cluster
(hack/cluster.sh, Kubernetes 1.32, the v1alpha1 component):

1. cost: the API server's CPU per pod create, side by side, with the policy not
   installed, and installed with 0, 10 and 100 markers in the pod's namespace. Every
   marker opts in and selects the pod, each with its own condition type (the worst
   case: every evaluation runs in full and adds a gate, one JSON patch per marker).
   Creates are server-side dry runs (`dryRun=All`: admission runs in full, nothing is
   stored, no controller or kubelet reacts), sent over one kept-alive HTTPS connection
   from this process, so the API server's CPU (utime+stime of its process,
   /proc/PID/stat) is what admission and validation cost. Rounds interleave the
   settings, so drift in the machine's load spreads over all of them.
2. delay: from a pod's create request to its Ready, on the real node, with the gate
   injected from an opted-in marker (exec `cat /tmp/ok`, the file there from the
   start; period 1 s, thresholds 1), and to its ContainersReady; a watch of the pods
   timestamps each (tests/cluster/kube.py, `Watch`).

Needs root and a cluster with the add-on installed and the image loaded, e.g. after
the cluster suite's readiness-gates tests kept their cluster:

    PROBEMARKER_TEST_CLUSTER_KEEP=1 python -m pytest -q -m cluster tests/cluster/test_readiness_gates.py
    python bench/readiness_gates.py
    hack/cluster.sh down

    python bench/readiness_gates.py --creates 200 --rounds 3 --pods 10

It installs the readiness-gates-v1alpha1 component itself for the settings that need
it (and removes it after), and uses namespaces bench-gates-*, deleted after.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster.install import STATE, Cluster
from tests.cluster.kube import REPO, Kubectl, Watch, busybox_pod, create_namespace, marker, wait_for
from tests.podfields import condition

COMPONENT = REPO / "manifests" / "components" / "readiness-gates-v1alpha1"
OPT_IN = "probemarker.io/inject-readiness-gates"
TICKS = os.sysconf("SC_CLK_TCK")


class Api:
    """POSTs over one kept-alive HTTPS connection as the kubeconfig's admin (a client
    certificate, or a token)."""

    def __init__(self, kubectl: Kubectl) -> None:
        config = kubectl.json("config", "view", "--raw", "--minify")
        cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
        host, port = cluster["server"].removeprefix("https://").rsplit(":", 1)
        self.headers = {"Content-Type": "application/json"}
        with tempfile.TemporaryDirectory() as folder:
            ca = Path(folder) / "ca"
            ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
            context = ssl.create_default_context(cafile=str(ca))
            if "token" in user:  # an admin with a token (a bare API server of your own)
                self.headers["Authorization"] = f"Bearer {user['token']}"
            else:
                cert, key = Path(folder) / "cert", Path(folder) / "key"
                cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
                key.write_bytes(base64.b64decode(user["client-key-data"]))
                context.load_cert_chain(str(cert), str(key))
        self.connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=30)

    def dry_create(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps(pod).encode()
        self.connection.request(
            "POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", body=body,
            headers=self.headers,
        )  # fmt: skip
        answer = self.connection.getresponse()
        data = answer.read()
        if answer.status != 201:
            raise AssertionError(f"dry-run create in {namespace}: {answer.status} {data[:300]!r}")
        return dict(json.loads(data))


def apiserver_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def component(kubectl: Kubectl, folder: Path, *, present: bool) -> None:
    (folder / "kustomization.yaml").write_text(
        json.dumps({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "components": [os.path.relpath(COMPONENT, folder)],
        })
    )  # fmt: skip
    if present:
        kubectl.run("apply", "-k", str(folder))
    else:
        kubectl.run("delete", "-k", str(folder), "--ignore-not-found")


def opted_in_marker(name: str, namespace: str, gate: str) -> dict[str, Any]:
    body = marker(name, namespace, app="bench", probe={"exec": {"command": ["cat", "/tmp/ok"]}},
                  label=None, condition_type=gate)  # fmt: skip
    body["metadata"]["annotations"] = {OPT_IN: "true"}
    return body


def gates(pod: dict[str, Any]) -> int:
    return len(pod["spec"].get("readinessGates") or [])


def namespace(kubectl: Kubectl, name: str) -> None:
    """Namespace `name` without markers, with its `default` ServiceAccount (made here
    when no controller-manager makes it, as on a bare API server, where a deleted
    namespace also stays Terminating: so it is emptied, not re-created)."""
    kubectl.run("create", "namespace", name, check=False)
    kubectl.run("-n", name, "delete", "podprobemarkers", "--all", "--wait=true", timeout=120)
    kubectl.run("-n", name, "create", "serviceaccount", "default", check=False)


# label -> (namespace, markers in it: (opted in, selects the pod), gates expected)
SETTINGS: dict[str, tuple[str, int, bool, bool, int]] = {
    "0 markers": ("bench-gates-0", 0, True, True, 0),
    "10 markers": ("bench-gates-10", 10, True, True, 10),
    "100 markers": ("bench-gates-100", 100, True, True, 100),
    "100 other": ("bench-gates-100-other", 100, True, False, 0),
    "100 no opt-in": ("bench-gates-100-off", 100, False, True, 0),
}


def cost(
    kubectl: Kubectl, api: Api, folder: Path, creates: int, rounds: int, pid: int
) -> dict[str, list[float]]:
    """API server CPU per create: without the policy, then for each of SETTINGS:
    N markers, each opting in (or not) and selecting the pod (or other pods)."""
    for ns, n, opt_in, selects, _ in SETTINGS.values():
        namespace(kubectl, ns)
        markers = [opted_in_marker(f"m{i}", ns, f"bench.test/g{i}") for i in range(n)]
        for body in markers:
            if not opt_in:
                del body["metadata"]["annotations"]
            if not selects:
                body["spec"]["selector"] = {"matchLabels": {"app": "other"}}
        if markers:
            kubectl.apply(*markers)
    pod = busybox_pod("", "", script="true", labels={"app": "bench"})
    del pod["metadata"]["name"], pod["metadata"]["namespace"]
    pod["metadata"]["generateName"] = "bench-"
    per_create: dict[str, list[float]] = {"no policy": [], **{k: [] for k in SETTINGS}}
    for _ in range(rounds):
        component(kubectl, folder, present=False)
        time.sleep(3)  # the policy source refreshes every second
        per_create["no policy"].append(measure(api, "bench-gates-0", pod, creates, 0, pid))
        component(kubectl, folder, present=True)
        wait_for(lambda: gates(api.dry_create("bench-gates-10", pod)), lambda g: g == 10,
                 timeout=60, what="the policy injecting in bench-gates-10")  # fmt: skip
        for label, (ns, _, _, _, expect) in SETTINGS.items():
            per_create[label].append(measure(api, ns, pod, creates, expect, pid))
    return per_create


def measure(
    api: Api, namespace: str, pod: dict[str, Any], creates: int, expect: int, pid: int
) -> float:
    """API server CPU ms per dry-run create."""
    for _ in range(20):  # warm up
        api.dry_create(namespace, pod)
    before = apiserver_cpu(pid)
    for _ in range(creates):
        got = gates(api.dry_create(namespace, pod))
        assert got == expect, f"{namespace}: {got} gates, expected {expect}"
    return (apiserver_cpu(pid) - before) * 1000 / creates


def _seen(watch: Watch, t0: float, name: str, kind: str) -> float | None:
    """Seconds from t0 to the first watch event where pod `name` has `kind` True."""
    return watch.first_after(
        t0,
        lambda p: (
            p["metadata"]["name"] == name and (condition(p, kind) or {}).get("status") == "True"
        ),
    )


def delay(kubectl: Kubectl, folder: Path, pods: int) -> dict[str, list[float]]:
    component(kubectl, folder, present=True)
    ns = "bench-gates-delay"
    create_namespace(kubectl, ns, fresh=True)  # waits for the controller's ServiceAccount
    kubectl.apply(opted_in_marker("gate", ns, "bench.test/gate"))
    out: dict[str, list[float]] = {"ContainersReady": [], "Ready": []}
    with Watch(kubectl, f"/api/v1/namespaces/{ns}/pods") as watch:
        probe_pod = busybox_pod("probe", ns, script="true", labels={"app": "bench"})
        wait_for(lambda: gates(Api(kubectl).dry_create(ns, probe_pod)), lambda g: g == 1,
                 timeout=60, what="the policy injecting in bench-gates-delay")  # fmt: skip
        for i in range(pods):
            name = f"p{i}"
            pod = busybox_pod(name, ns, script="touch /tmp/ok && exec sleep 2147483647",
                              labels={"app": "bench"})  # fmt: skip
            t0 = time.monotonic()
            kubectl.apply(pod)
            for kind in out:
                found = wait_for(
                    lambda t0=t0, name=name, kind=kind: _seen(watch, t0, name, kind),
                    lambda v: v is not None,
                    timeout=60,
                    what=f"{name} {kind}",
                )
                assert found is not None
                out[kind].append(found)
            admitted = kubectl.get("pod", name, ns)
            assert [g["conditionType"] for g in admitted["spec"]["readinessGates"]] == [
                "bench.test/gate"
            ]
            kubectl.run("-n", ns, "delete", "pod", name, "--wait=false")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--creates", type=int, default=200, help="dry-run creates per measure")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pods", type=int, default=10, help="pods for the delay to Ready")
    parser.add_argument(
        "--kubeconfig", type=Path, help="another API server (the cost only; with --apiserver-pid)"
    )
    parser.add_argument("--apiserver-pid", type=int, help="its kube-apiserver process")
    parser.add_argument("--only", choices=("cost", "delay"), help="measure one of the two")
    args = parser.parse_args()
    if args.kubeconfig is not None:
        if args.apiserver_pid is None:
            parser.error("--kubeconfig needs --apiserver-pid")
        kubectl, pid = Kubectl(args.kubeconfig), args.apiserver_pid
    else:
        kubectl = Cluster.at(STATE).kubectl
        pid = int((STATE / "apiserver.pid").read_text())
    folder = Path(tempfile.mkdtemp(prefix="bench-gates-", dir=REPO / "bench"))
    try:
        per_create: dict[str, list[float]] = {}
        if args.only != "delay":
            per_create = cost(kubectl, Api(kubectl), folder, args.creates, args.rounds, pid)
        # The delay needs a kubelet and the daemon: hack/cluster.sh's cluster only.
        delays: dict[str, list[float]] = {}
        if args.kubeconfig is None and args.only != "cost":
            delays = delay(kubectl, folder, args.pods)
    finally:
        component(kubectl, folder, present=False)
        for ns in [s[0] for s in SETTINGS.values()] + ["bench-gates-delay"]:
            if args.kubeconfig is None:
                kubectl.run("delete", "namespace", ns, "--wait=false", "--ignore-not-found",
                            check=False)  # fmt: skip
            else:  # a bare API server has no namespace controller: its markers go
                kubectl.run("-n", ns, "delete", "podprobemarkers", "--all", check=False)
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
    again = "python bench/readiness_gates.py"
    if args.only != "delay":
        again += f" --creates {args.creates} --rounds {args.rounds}"
    if args.kubeconfig is not None:
        again += f" --kubeconfig {args.kubeconfig} --apiserver-pid PID"
    elif args.only != "cost":
        again += f" --pods {args.pods}"
    if args.only:
        again += f" --only {args.only}"
    if per_create:
        print(f"API server CPU per pod create (dry run, {args.creates} creates x {args.rounds} "
              "rounds, median of rounds, ms):")  # fmt: skip
        print("  " + "  ".join(f"{k:>12}" for k in per_create))
        print("  " + "  ".join(f"{statistics.median(v):>12.2f}" for v in per_create.values()))
        rounds = "; ".join(
            f"{k}: {', '.join(f'{x:.2f}' for x in v)}" for k, v in per_create.items()
        )
        print(f"  rounds: {rounds}")
    if delays:
        print(f"From the create request to the pod's condition True, seconds, {args.pods} pods "
              "(gate injected, exec probe period 1 s, thresholds 1):")  # fmt: skip
        for kind, values in delays.items():
            print(f"  {kind:>16}: median {statistics.median(values):.2f}, "
                  f"min {min(values):.2f}, max {max(values):.2f}")  # fmt: skip
    print(f"Reproduce: {again}")


if __name__ == "__main__":
    main()
