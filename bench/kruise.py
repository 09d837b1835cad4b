"""OpenKruise, as the user brings it, on the project's real node (hack/cluster.sh):
installed as its users install it and removed without a trace, for bench/vs_kruise.py.

    python bench/kruise.py install --kruise LABEL=SOURCE   # image, render, apply, wait
    python bench/kruise.py remove                          # markers, webhooks, the rest

Nothing of Kruise is in this repository: SOURCE names a release the user brings, one of

- `image:REF,config=DIR`: REF an image already in the node's containerd that holds
  /manager and /kruise-daemon, as Kruise's released `openkruise/kruise-manager:vX.Y.Z`
  does (`podman pull docker.io/openkruise/kruise-manager:v1.5.4`, then `hack/cluster.sh
  load-image docker.io/openkruise/kruise-manager:v1.5.4`); DIR the same release's
  `config/` folder (from its source archive). The image stays the user's: remove leaves it;
- `DIR` (or `DIR,config=CONFIG`): a folder holding Kruise's two programs, `manager` and
  `kruise-daemon`, as plain executables, and the release's `config/` (or CONFIG). The
  bench builds an image of them on the project's Debian base (hack/build-image.sh makes
  it) with a world-writable /log (the manager, user 65534, writes its protection log
  there) and root as the user (kruise-daemon opens the runtime socket; its DaemonSet sets
  no user), with `podman build --isolation chroot`, and loads it into the node's
  containerd (`hack/cluster.sh load-image`); remove removes it.

LABEL names the release in the output (e.g. `v1.5.4`, `v1.5.4+#2007`). A missing or
malformed SOURCE fails before anything is installed, in one line naming the flag, the
label and the fix.

What install does, after the image:
1. the release's `config/default` rendered with `kubectl kustomize`;
2. `customize`: what Kruise v1.5.4's Helm chart (charts/versions/kruise/1.5.4/values.yaml)
   sets for production where config/default is a developer's setting, and what this
   node needs, the same for every release. Every change is listed in CHANGES and printed;
3. `kubectl apply --server-side` (the CRDs are too large for client-side apply), then
   waits: the manager Available, its webhook configurations carrying a CA bundle, a
   server-side dry-run create of a PodProbeMarker answered by its webhook, the daemon
   Ready on the node;
4. says what ran: the manager pod's image and image ID, and the version the manager's
   program records (Go's build info: its module's version, its VCS revision) when it
   records one. The manager has no --version; nothing else is guessed.

One Kruise at a time (two releases share their CRDs and namespace): install refuses
while another is installed. It keeps what it applied and which image in the cluster's
state folder (kruise.yaml, kruise.json) for remove.

remove: deletes every Kruise PodProbeMarker (their finalizer needs the manager), the
webhook configurations (so no pod create waits on a manager going away), then every
object install applied (the CRDs take the NodePodProbes with them), waits for the
namespace to go, and removes the image it built from the node's containerd and podman.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from probemarker.sim.kubelet.images import normalized_image
from tests.cluster.install import STATE, Cluster
from tests.cluster.kube import Kubectl, wait_for

HELM_CHART = "1.5.4"  # the Kruise chart whose production values `customize` applies
BASE = os.environ.get("PROBEMARKER_BASE_IMAGE", "localhost/probemarker-base:bookworm")
BUILT = "localhost/probemarker-bench-kruise"  # the images built from a folder (tag: the label)
PROGRAMS = ("manager", "kruise-daemon")
KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")
NAMESPACE = "kruise-system"
MANAGER_USER = f"system:serviceaccount:{NAMESPACE}:kruise-manager"
DAEMON_USER = f"system:serviceaccount:{NAMESPACE}:kruise-daemon"
MANAGER = "kruise-controller-manager"
DAEMON = "kruise-daemon"
# The Helm chart's production values for v1.5.4, where config/default differs
FEATURE_GATES = "--feature-gates=ImagePullJobGate=true"  # config/default: AllAlpha=true
LOG_LEVEL = "4"  # config/default: 5
CHANGES = (
    "image: the user's (image:REF, in the node's containerd) or one built of the folder's "
    "manager and kruise-daemon and loaded into the node; imagePullPolicy Never",
    f"args as the Helm chart {HELM_CHART} sets them: -v={LOG_LEVEL}, {FEATURE_GATES} (config/default: -v=5, AllAlpha=true)",
    "KUBE_CACHE_MUTATION_DETECTOR=false, as the Helm chart (config/default: true, a debugging aid that copies the cache)",
    "failurePolicy Ignore for the pod webhooks, as the Helm chart (config/default: Fail)",
    "no CPU limit on the manager and the daemon (probemarker sets none either): no figure is a throttle's",
    "kruise-daemon: the node's containerd socket directory as `runtime-socket`, --socket-file=containerd.sock",
)


# -- the user's Kruise: --kruise LABEL=SOURCE --------------------------------------------

FLAG = "--kruise"
EXAMPLES = (
    "v1.5.4=image:docker.io/openkruise/kruise-manager:v1.5.4,config=DIR "
    "or v1.5.4=DIR (with manager, kruise-daemon and config/ in DIR)"
)
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+#@-]{0,62}")
IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]*")


@dataclass(frozen=True)
class Source:
    """One Kruise release the user brings, from `--kruise LABEL=SOURCE`."""

    label: str
    text: str  # SOURCE as given
    config: Path  # the release's config/ folder
    image: str = ""  # image:REF, already in the node's containerd
    folder: Path | None = None  # DIR: the two programs, of which the bench builds an image

    @property
    def built(self) -> bool:
        return self.folder is not None

    def image_ref(self) -> str:
        """The image the pods run: the user's, or the one built of the folder."""
        return built_image(self.label) if self.built else self.image


def _fail(label: str, fix: str) -> SystemExit:
    return SystemExit(f"{FLAG} {label}: {fix}")


def parse_source(value: str) -> Source:
    """`LABEL=SOURCE` as the flag gives it (its form only: check_source reads the disk)."""
    label, equals, text = value.partition("=")
    if not equals or not label:
        raise _fail(repr(value), f"write LABEL=SOURCE, e.g. {FLAG} {EXAMPLES}")
    if not LABEL.fullmatch(label):
        raise _fail(
            repr(label),
            "a label is 1 to 63 letters, digits and . _ + # @ -, starting with a letter or "
            "digit (e.g. v1.5.4 or v1.5.4+#2007)",
        )
    head, has_config, config = text.partition(",config=")
    if has_config and not config:
        raise _fail(label, "config= names no folder; write config=DIR, DIR the release's config/")
    if head.startswith("image:"):
        ref = head.removeprefix("image:")
        if not IMAGE_REF.fullmatch(ref):
            raise _fail(
                label,
                f"{head!r} names no image; write image:REF,config=DIR, e.g. {FLAG} {EXAMPLES}",
            )
        if not has_config:
            raise _fail(
                label,
                f"image:{ref} needs the same release's manifests: add ,config=DIR "
                "(DIR its config/ folder, from the release's source archive)",
            )
        return Source(label, text, Path(config), image=ref)
    if not head:
        raise _fail(label, f"no SOURCE; write {label}=image:REF,config=DIR or {label}=DIR")
    folder = Path(head)
    return Source(label, text, Path(config) if has_config else folder / "config", folder=folder)


def parse_sources(values: Iterable[str]) -> list[Source]:
    """Every `--kruise` given, in order; each label once."""
    out: list[Source] = []
    for value in values:
        source = parse_source(value)
        if any(known.label == source.label for known in out):
            raise _fail(
                source.label,
                "given twice; give each Kruise a label of its own (e.g. v1.5.4 and v1.5.4+#2007)",
            )
        out.append(source)
    return out


def check_source(source: Source) -> None:
    """What SOURCE names is there: the folder's two programs, the config/ folder."""
    if source.folder is not None:
        folder = source.folder
        if not folder.is_dir():
            raise _fail(
                source.label,
                f"no folder {folder}; give a folder holding Kruise's manager and kruise-daemon "
                "and its config/, or image:REF,config=DIR",
            )
        for name in PROGRAMS:
            path = folder / name
            if not path.is_file():
                raise _fail(
                    source.label,
                    f"{folder} has no {name}; put Kruise's two programs there, "
                    "manager and kruise-daemon (or use image:REF,config=DIR)",
                )
            if not os.access(path, os.X_OK):
                raise _fail(source.label, f"{path} is not executable; chmod +x it")
    if not any((source.config / "default" / name).is_file() for name in KUSTOMIZATIONS):
        where = (
            f"copy the release's config/ into {source.folder} or add ,config=DIR"
            if source.folder is not None and source.config == source.folder / "config"
            else "give the release's config/ folder as config=DIR"
        )
        raise _fail(source.label, f"{source.config} has no default/kustomization.yaml; {where}")


def built_image(label: str) -> str:
    """The image the bench builds for `label` (a tag may not hold + or #, hence the hash)."""
    tag = re.sub(r"[^A-Za-z0-9_.-]", "-", label)
    return f"{BUILT}:{tag}-{hashlib.sha256(label.encode()).hexdigest()[:8]}"


def normalize_ref(ref: str) -> str:
    """An image reference as containerd names it (docker.io/..., :latest when untagged):
    the sim's kubelet follows the same docker reference normalization."""
    return normalized_image(ref)


def has_image(listing: str, ref: str) -> bool:
    """Whether `ctr images ls -q`'s output names `ref`."""
    names = {line.strip() for line in listing.splitlines()}
    return ref in names or normalize_ref(ref) in names


def node_images(cluster: Cluster) -> str:
    """The names of the images in the node's containerd (`ctr images ls -q`)."""
    done = subprocess.run(
        ["ctr", "--connect-timeout", "5s", "-a", str(cluster.socket()), "-n", "k8s.io",
         "images", "ls", "-q"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(
            f"the node's containerd ({cluster.socket()}) lists no images: "
            f"{done.stderr.strip()[-300:]}; is the cluster up (hack/cluster.sh up)?"
        )
    return done.stdout


def check_loaded(source: Source, listing: str) -> None:
    """An image:REF source is in the node's containerd (`listing`: node_images)."""
    if not source.built and not has_image(listing, source.image):
        raise _fail(
            source.label,
            f"the node's containerd has no image {source.image}; load it first: "
            f"podman pull {source.image} && hack/cluster.sh load-image {source.image}",
        )


# -- the image built of a folder ---------------------------------------------------------


CONTAINERFILE = """\
FROM {base}
COPY manager kruise-daemon /
RUN mkdir -m 1777 /log
USER 0
"""


def build_image(source: Source, base: str = BASE) -> None:
    assert source.folder is not None
    if subprocess.run(["podman", "image", "exists", base], check=False).returncode != 0:
        raise SystemExit(f"podman has no base image {base}: hack/build-image.sh makes it")
    with tempfile.TemporaryDirectory() as context:
        for name in PROGRAMS:
            target = Path(context) / name
            shutil.copyfile(source.folder / name, target)
            target.chmod(0o755)
        (Path(context) / "Containerfile").write_text(CONTAINERFILE.format(base=base))
        subprocess.run(
            ["podman", "build", "--isolation", "chroot", "-q", "-t", source.image_ref(), context],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip


# -- the manifests ----------------------------------------------------------------------


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


def render(kubectl: Kubectl, source: Source, socket: Path) -> list[dict[str, Any]]:
    text = kubectl.run("kustomize", str(source.config / "default"), timeout=120).stdout
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    return customize(docs, source.image_ref(), socket)


# -- what ran ---------------------------------------------------------------------------

# Go's markers around the module information it records in a program (runtime/debug)
GO_INFO_START = bytes.fromhex("3077af0c9274080241e1c107e6d618e6")
GO_INFO_END = bytes.fromhex("f932433186182072008242104116d8f2")


def build_info(program: bytes) -> dict[str, str]:
    """What a Go program records of its build: `module` and `version` (its main module's
    `mod` line; `(devel)` when built from a source tree) and the `build` settings that
    name its source (vcs.revision, vcs.time, vcs.modified); {} when it records none."""
    start = program.find(GO_INFO_START)
    end = program.find(GO_INFO_END, start + len(GO_INFO_START)) if start >= 0 else -1
    if end < 0:
        return {}
    out: dict[str, str] = {}
    text = program[start + len(GO_INFO_START) : end].decode("utf-8", "replace")
    for line in text.splitlines():
        fields = line.split("\t")
        if fields[0] == "mod" and len(fields) >= 3:
            out["module"], out["version"] = fields[1], fields[2]
        elif fields[0] == "build" and len(fields) >= 2:
            key, _, value = fields[1].partition("=")
            if key.startswith("vcs."):
                out[key] = value
    return out


def recorded_version(build: Mapping[str, str]) -> str | None:
    """The version a manager's build info names: its module's, else its VCS revision."""
    version = build.get("version", "")
    if version and version != "(devel)":
        return version
    revision = build.get("vcs.revision")
    if revision:
        dirty = " (modified)" if build.get("vcs.modified") == "true" else ""
        return f"revision {revision}{dirty}"
    return None


def identity(source: Source, status: Mapping[str, Any], build: Mapping[str, str]) -> dict[str, Any]:
    """Which Kruise ran: the label and SOURCE given, the manager container's image and
    image ID (its pod's status), what the manager's program records of its version."""
    return {
        "label": source.label,
        "source": source.text,
        "image": status.get("image") or source.image_ref(),
        "image_id": status.get("imageID") or None,
        "manager_build": dict(build),
        "version": recorded_version(build),
    }


def describe(ran: Mapping[str, Any]) -> str:
    """One line for `identity`'s answer."""
    image = ran["image"] + (f" ({ran['image_id']})" if ran.get("image_id") else "")
    version = (
        f"the manager records {ran['version']}"
        if ran.get("version")
        else "the manager records no version"
    )
    return f"Kruise {ran['label']}: {FLAG} {ran['label']}={ran['source']}; image {image}; {version}"


def pids_of(argv0: Sequence[str]) -> list[int]:
    """PIDs whose argv starts with `argv0`."""
    wanted = "\0".join(argv0).encode()
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(wanted):
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


def identify(cluster: Cluster, source: Source) -> dict[str, Any]:
    kubectl = cluster.kubectl
    selector = kubectl.json("-n", NAMESPACE, "get", "deployment", MANAGER)["spec"]["selector"]
    labels = ",".join(f"{k}={v}" for k, v in selector.get("matchLabels", {}).items())
    pods = kubectl.json("-n", NAMESPACE, "get", "pods", "-l", labels)["items"]
    statuses = [s for pod in pods for s in pod.get("status", {}).get("containerStatuses", [])]
    build: dict[str, str] = {}
    found = pids_of(("/manager",))
    if len(found) == 1:
        with suppress(OSError):  # not read: no version said, none guessed
            build = build_info(Path(f"/proc/{found[0]}/exe").read_bytes())
    return identity(source, statuses[0] if statuses else {}, build)


# -- install and remove -----------------------------------------------------------------


def _rendered_path(cluster: Cluster) -> Path:
    return cluster.state / "kruise.yaml"  # kept for remove, which deletes what was applied


def _record_path(cluster: Cluster) -> Path:
    return cluster.state / "kruise.json"  # which Kruise, which image: for remove


def installed(cluster: Cluster) -> dict[str, Any] | None:
    """What install recorded of the Kruise installed now, if any."""
    path = _record_path(cluster)
    return dict(json.loads(path.read_text())) if path.exists() else None


def install(cluster: Cluster, source: Source) -> dict[str, Any]:
    """Install `source`, wait until it serves; which Kruise ran (`identity`)."""
    kubectl = cluster.kubectl
    check_source(source)
    if (other := installed(cluster)) is not None:
        raise SystemExit(
            f"kruise {source.label}: Kruise {other['label']} is installed and two cannot be "
            "at once; python bench/kruise.py remove removes it"
        )
    image = source.image_ref()
    if not source.built:
        check_loaded(source, node_images(cluster))
    print(f"kruise {source.label}: {source.text}; image {image}", file=sys.stderr)
    record = {"label": source.label, "source": source.text, "image": image, "built": source.built}
    _record_path(cluster).write_text(json.dumps(record) + "\n")  # before anything: for remove
    if source.built:
        build_image(source)
        cluster.script("load-image", image, timeout=300)
    docs = render(kubectl, source, cluster.socket())
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
    ran = identify(cluster, source)
    print(f"{describe(ran)}: installed, webhooks serving", file=sys.stderr)
    return ran


def remove(cluster: Cluster, source: Source | None = None) -> None:
    """Remove the Kruise install recorded (or, with no record, `source`'s objects and the
    image built for it)."""
    kubectl = cluster.kubectl
    record = installed(cluster)
    if record is None and source is not None:
        record = {"label": source.label, "image": source.image_ref(), "built": source.built}
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
    if record is not None and record["built"]:  # an image the user loaded stays theirs
        cluster.script("unload-image", record["image"], timeout=120)
        subprocess.run(
            ["podman", "rmi", "--ignore", record["image"]], check=True, stdout=subprocess.DEVNULL
        )
    left = kubectl.run("get", "crd", "-o", "name").stdout.split()
    kruise_left = [name for name in left if name.endswith(".kruise.io")]
    if kruise_left:
        raise SystemExit(f"kruise remove: CRDs left: {kruise_left}")
    _record_path(cluster).unlink(missing_ok=True)
    label = record["label"] if record is not None else "(no record of which)"
    print(f"kruise {label}: removed", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("install", "remove"))
    parser.add_argument(
        FLAG,
        metavar="LABEL=SOURCE",
        help="the Kruise to install: LABEL=image:REF,config=DIR or LABEL=DIR (the module's "
        "docstring); remove needs it only when install's record is gone",
    )
    args = parser.parse_args()
    source = parse_source(args.kruise) if args.kruise else None
    if args.action == "install":
        if source is None:
            raise SystemExit(f"install: which Kruise? {FLAG} LABEL=SOURCE, e.g. {FLAG} {EXAMPLES}")
        check_source(source)
    cluster = Cluster.at(STATE)
    started = time.monotonic()
    if args.action == "install":
        assert source is not None
        install(cluster, source)
    else:
        remove(cluster, source)
    print(f"{args.action}: {time.monotonic() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
