"""OpenKruise v1.5.4 on the project's real node (hack/cluster.sh), installed as its users
install it and removed without a trace, for bench/vs_kruise.py.

    python bench/kruise.py install     # image, load, render, apply, wait until serving
    python bench/kruise.py remove      # markers, webhooks, the rest, the images

What install does:
1. an image of the two binaries in ../shared/kruise/bin (`xz -dc`, checked against its
   SHA256SUMS) on the project's Debian base (hack/build-image.sh makes it), with a
   world-writable /log (the manager, user 65534, writes its protection log there) and
   root as the user (kruise-daemon opens the runtime socket; its DaemonSet sets no user);
   built with `podman build --isolation chroot` and loaded into the node's containerd
   (`hack/cluster.sh load-image`);
2. the release's `config/default` (from ../shared/kruise/config when build.sh exported
   it there, else from a git directory holding openkruise/kruise at the v1.5.4 commit:
   $PROBEMARKER_KRUISE_GIT, default ../.mirror/openkruise+kruise/repo, which the
   project's `fetch github:openkruise/kruise` makes) rendered with `kubectl kustomize`;
3. `customize`: what the release's Helm chart (charts/versions/kruise/1.5.4/values.yaml)
   sets for production where config/default is a developer's setting, and what this
   node needs. Every change is listed in CHANGES and printed;
4. `kubectl apply --server-side` (the CRDs are too large for client-side apply), then
   waits: the manager Available, its webhook configurations carrying a CA bundle, a
   server-side dry-run create of a PodProbeMarker answered by its webhook, the daemon
   Ready on the node.

remove: deletes every Kruise PodProbeMarker (their finalizer needs the manager), the
webhook configurations (so no pod create waits on a manager going away), then every
object install applied (the CRDs take the NodePodProbes with them), waits for the
namespace to go, and removes the image from the node's containerd and podman.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import lzma
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster.install import STATE, Cluster
from tests.cluster.kube import REPO, Kubectl, wait_for

VERSION = "v1.5.4"
COMMIT = "4693f8160528f2c17f9016be7746e409d3d7a9eb"
IMAGE = f"localhost/kruise:{VERSION}"
BASE = os.environ.get("PROBEMARKER_BASE_IMAGE", "localhost/probemarker-base:bookworm")
KRUISE_DIR = Path(os.environ.get("PROBEMARKER_KRUISE_DIR", REPO.parent / "shared" / "kruise"))
KRUISE_GIT = Path(
    os.environ.get("PROBEMARKER_KRUISE_GIT", REPO.parent / ".mirror" / "openkruise+kruise" / "repo")
)
NAMESPACE = "kruise-system"
MANAGER_USER = f"system:serviceaccount:{NAMESPACE}:kruise-manager"
DAEMON_USER = f"system:serviceaccount:{NAMESPACE}:kruise-daemon"
MANAGER = "kruise-controller-manager"
DAEMON = "kruise-daemon"
# The Helm chart's production values for this release, where config/default differs
FEATURE_GATES = "--feature-gates=ImagePullJobGate=true"  # config/default: AllAlpha=true
LOG_LEVEL = "4"  # config/default: 5
CHANGES = (
    "image: the two binaries of ../shared/kruise/bin, loaded into the node (imagePullPolicy Never)",
    f"args as the Helm chart sets them: -v={LOG_LEVEL}, {FEATURE_GATES} (config/default: -v=5, AllAlpha=true)",
    "KUBE_CACHE_MUTATION_DETECTOR=false, as the Helm chart (config/default: true, a debugging aid that copies the cache)",
    "failurePolicy Ignore for the pod webhooks, as the Helm chart (config/default: Fail)",
    "no CPU limit on the manager and the daemon (probemarker sets none either): no figure is a throttle's",
    "kruise-daemon: the node's containerd socket directory as `runtime-socket`, --socket-file=containerd.sock",
)


# -- the image --------------------------------------------------------------------------


def check_sums(folder: Path) -> dict[str, Path]:
    """The two compressed binaries in `folder`, after checking them against SHA256SUMS."""
    sums = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        if line.strip():
            digest, name = line.split()
            sums[name.lstrip("*")] = digest
    found = {}
    for name in ("kruise-manager.xz", "kruise-daemon.xz"):
        path = folder / name
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if sums.get(name) != actual:
            raise SystemExit(f"{path}: sha256 {actual}, SHA256SUMS says {sums.get(name)}")
        found[name.removesuffix(".xz")] = path
    return found


CONTAINERFILE = """\
FROM {base}
COPY manager kruise-daemon /
RUN mkdir -m 1777 /log
USER 0
"""


def build_image(kruise_dir: Path = KRUISE_DIR, base: str = BASE) -> None:
    binaries = check_sums(kruise_dir / "bin")
    if subprocess.run(["podman", "image", "exists", base], check=False).returncode != 0:
        raise SystemExit(f"podman has no base image {base}: hack/build-image.sh makes it")
    with tempfile.TemporaryDirectory() as context:
        for name, path in (("manager", binaries["kruise-manager"]), (DAEMON, binaries[DAEMON])):
            target = Path(context) / name
            target.write_bytes(lzma.decompress(path.read_bytes()))
            target.chmod(0o755)
        (Path(context) / "Containerfile").write_text(CONTAINERFILE.format(base=base))
        subprocess.run(
            ["podman", "build", "--isolation", "chroot", "-q", "-t", IMAGE, context],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip


# -- the manifests ----------------------------------------------------------------------


def export_config(dest: Path) -> Path:
    """The release's config/ in `dest` (a copy of build.sh's export, or from git)."""
    exported = KRUISE_DIR / "config"
    if exported.is_dir():
        subprocess.run(["cp", "-r", str(exported), str(dest / "config")], check=True)
        return dest / "config"
    if not (KRUISE_GIT / "HEAD").exists() and not (KRUISE_GIT / ".git").exists():
        raise SystemExit(
            f"no Kruise config/: neither {exported} nor a git directory at {KRUISE_GIT}; "
            "set PROBEMARKER_KRUISE_GIT to a clone of github.com/openkruise/kruise"
        )
    archive = subprocess.run(
        ["git", "--git-dir", str(KRUISE_GIT), "archive", COMMIT, "config"],
        capture_output=True, check=False,
    )  # fmt: skip
    if archive.returncode != 0:
        raise SystemExit(f"{KRUISE_GIT}: no {VERSION} ({COMMIT}): {archive.stderr.decode()}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest / "config"


def _container(docs: Iterable[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for doc in docs:
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            containers: list[dict[str, Any]] = doc["spec"]["template"]["spec"]["containers"]
            if len(containers) != 1:
                raise SystemExit(f"{kind} {name}: {len(containers)} containers, expected 1")
            return containers[0]
    raise SystemExit(f"config/default renders no {kind} {name}")


def customize(docs: list[dict[str, Any]], image: str, socket: Path) -> list[dict[str, Any]]:
    """config/default's documents with CHANGES applied (a new list; the input is kept)."""
    out = copy.deepcopy(docs)
    for kind, name, args in (
        ("Deployment", MANAGER, ["--enable-leader-election", "--logtostderr=true", f"--v={LOG_LEVEL}", FEATURE_GATES]),
        ("DaemonSet", DAEMON, ["--logtostderr=true", f"-v={LOG_LEVEL}", FEATURE_GATES, f"--socket-file={socket.name}"]),
    ):  # fmt: skip
        container = _container(out, kind, name)
        container["image"] = image
        container["imagePullPolicy"] = "Never"
        container["args"] = args
        for env in container.get("env", []):
            if env["name"] == "KUBE_CACHE_MUTATION_DETECTOR":
                env["value"] = "false"
        container.get("resources", {}).get("limits", {}).pop("cpu", None)
    for doc in out:
        if doc["kind"] == "DaemonSet" and doc["metadata"]["name"] == DAEMON:
            for volume in doc["spec"]["template"]["spec"]["volumes"]:
                if volume["name"] == "runtime-socket":
                    volume["hostPath"] = {"path": str(socket.parent), "type": "Directory"}
        if doc["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for hook in doc["webhooks"]:
                if any(
                    "pods" in rule["resources"] or "pods/eviction" in rule["resources"]
                    for rule in hook["rules"]
                ):
                    hook["failurePolicy"] = "Ignore"
    return out


def render(kubectl: Kubectl, socket: Path) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as folder:
        config = export_config(Path(folder))
        text = kubectl.run("kustomize", str(config / "default"), timeout=120).stdout
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    return customize(docs, IMAGE, socket)


# -- install and remove -----------------------------------------------------------------


def _rendered_path(cluster: Cluster) -> Path:
    return cluster.state / "kruise.yaml"  # kept for remove, which deletes what was applied


def install(cluster: Cluster) -> None:
    kubectl = cluster.kubectl
    print(f"kruise {VERSION}: image {IMAGE} on {BASE}", file=sys.stderr)
    build_image()
    cluster.script("load-image", IMAGE, timeout=300)
    docs = render(kubectl, cluster.socket())
    for change in CHANGES:
        print(f"  {change}", file=sys.stderr)
    path = _rendered_path(cluster)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    kubectl.run("apply", "--server-side", "--force-conflicts", "-f", str(path), timeout=180)
    kubectl.run(
        "-n", NAMESPACE, "rollout", "status", f"deployment/{MANAGER}", "--timeout=180s", timeout=190
    )
    wait_for(
        lambda: kubectl.run(
            "get", "mutatingwebhookconfiguration", "kruise-mutating-webhook-configuration",
            "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}",
        ).stdout,
        bool, timeout=120, what="the manager's CA bundle in its webhook configuration",
    )  # fmt: skip
    probe_marker = {
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "PodProbeMarker",
        "metadata": {"name": "install-check", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "none"}}, "probes": [{
            "name": "p", "containerName": "main",
            "probe": {"exec": {"command": ["true"]}},
            "markerPolicy": [{"state": "Succeeded", "labels": {"install-check": "ok"}}],
        }]},
    }  # fmt: skip
    wait_for(
        lambda: kubectl.run(
            "create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(probe_marker), check=False
        ),
        lambda done: done.returncode == 0,
        timeout=120,
        what="a dry-run PodProbeMarker through Kruise's webhook",
    )
    kubectl.run(
        "-n", NAMESPACE, "rollout", "status", f"daemonset/{DAEMON}", "--timeout=180s", timeout=190
    )
    print(f"kruise {VERSION}: installed, webhooks serving", file=sys.stderr)


def remove(cluster: Cluster) -> None:
    kubectl = cluster.kubectl
    crds = kubectl.run("get", "crd", "podprobemarkers.apps.kruise.io", check=False)
    if crds.returncode == 0:
        kubectl.run("delete", "podprobemarkers.apps.kruise.io", "--all-namespaces", "--all",
                    "--wait=true", "--timeout=120s", timeout=130)  # fmt: skip
    for kind in ("mutating", "validating"):
        kubectl.run("delete", f"{kind}webhookconfiguration", f"kruise-{kind}-webhook-configuration",
                    "--ignore-not-found", timeout=60)  # fmt: skip
    path = _rendered_path(cluster)
    if path.exists():
        kubectl.run(
            "delete",
            "--ignore-not-found",
            "--wait=true",
            "--timeout=180s",
            "-f",
            str(path),
            timeout=200,
        )
        path.unlink()
    kubectl.run("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", timeout=200)
    cluster.script("unload-image", IMAGE, timeout=120)
    subprocess.run(["podman", "rmi", "--ignore", IMAGE], check=True, stdout=subprocess.DEVNULL)
    left = kubectl.run("get", "crd", "-o", "name").stdout.split()
    kruise_left = [name for name in left if name.endswith(".kruise.io")]
    if kruise_left:
        raise SystemExit(f"kruise remove: CRDs left: {kruise_left}")
    print(f"kruise {VERSION}: removed", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("install", "remove"))
    args = parser.parse_args()
    cluster = Cluster.at(STATE)
    started = time.monotonic()
    install(cluster) if args.action == "install" else remove(cluster)
    print(f"{args.action}: {time.monotonic() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
