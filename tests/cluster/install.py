"""The overlay the cluster suite (and bench/cluster_flips.py) installs the add-on with.

Stage: a test helper, pure. Input: the overlay's folder, the exec backend, the node's
containerd socket. Output: kustomization.yaml text, as docs/installation.md tells
users to write it: `resources` the checkout's manifests/, the image renamed to the one
loaded into the node, the `node-scope` component, and for the `cri` backend the `cri`
component with the hostPath of this node's socket (not containerd's default path; the
path inside the pod stays, as docs/cri.md shows for other sockets).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from probemarker import __version__
from tests.cluster.kube import REPO

IMAGE_NAME = "localhost/probemarker"
IMAGE = f"{IMAGE_NAME}:{__version__}"


def overlay(folder: Path, backend: str, socket: Path) -> str:
    if backend not in ("api", "cri"):
        raise ValueError(f"backend {backend!r}: api or cri")
    manifests = os.path.relpath(REPO / "manifests", folder)
    components = [f"{manifests}/components/node-scope"]
    patches = []
    if backend == "cri":
        components.append(f"{manifests}/components/cri")
        volume = {"name": "cri-socket", "hostPath": {"path": str(socket), "type": "Socket"}}
        daemonset = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "probemarker"},
            "spec": {"template": {"spec": {"volumes": [volume]}}},
        }
        patches.append(
            {
                "target": {"kind": "DaemonSet", "name": "probemarker"},
                "patch": yaml.safe_dump(daemonset),
            }
        )
    return yaml.safe_dump(
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [manifests],
            "components": components,
            "patches": patches,
            "images": [
                {
                    "name": "ghcr.io/probemarker/probemarker",
                    "newName": IMAGE_NAME,
                    "newTag": __version__,
                }
            ],
        }
    )
