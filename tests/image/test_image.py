"""The image: what the Containerfile promises, read from the file (always), and the image
itself, built and checked by hack/build-image.sh where podman can do it (root, podman,
mmdebstrap or the script's base already imported).

The static tests hold the properties the DaemonSet and docs/image.md rely on: one base
argument for both stages (the copied virtual environment links to the base's
interpreter), `probemarker run` as an exec-form entrypoint (SIGTERM reaches the daemon,
not a shell), a numeric non-root user (the kubelet checks runAsNonRoot only on a numeric
user), the grpc extra installed, modules compiled at build time, and build secrets
mounted for pip rather than copied into a layer.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from probemarker import __version__
from tests.image.containerfile import REPO, exec_form, image_user, load

SCRIPT = REPO / "hack" / "build-image.sh"
VENV = "/opt/probemarker"


# -- the Containerfile ----------------------------------------------------------------


def test_both_stages_build_on_the_base_image_argument() -> None:
    head, found = load()
    declared = [i.arguments for i in head if i.keyword == "ARG"]
    assert any(re.fullmatch(r"BASE_IMAGE=\S+", arg) for arg in declared), declared
    assert len(found) == 2
    assert [stage.base for stage in found] == ["${BASE_IMAGE}", "${BASE_IMAGE}"]
    assert found[0].name == "builder"


def test_the_entrypoint_is_probemarker_run_in_exec_form() -> None:
    _, found = load()
    entry = exec_form(found[-1].last("ENTRYPOINT"))
    assert entry == [f"{VENV}/bin/probemarker", "run"]
    assert not found[-1].all("CMD")  # the DaemonSet's args are flags of `run`


def test_the_user_is_numeric_and_not_root() -> None:
    uid, gid = image_user()
    assert uid != 0
    assert gid != 0


def test_the_final_stage_takes_the_builders_environment_and_runs_no_pip() -> None:
    _, (_builder, final) = load()
    assert f"--from=builder {VENV} {VENV}" in final.all("COPY")
    assert not [run for run in final.all("RUN") if "pip" in run]
    assert final.env()["PATH"].startswith(f"{VENV}/bin:")


def test_the_grpc_and_cri_extras_are_installed_and_pyproject_defines_them() -> None:
    _, (builder, _final) = load()
    installs = [run for run in builder.all("RUN") if f"{VENV}/bin/pip install" in run]
    assert len(installs) == 1
    assert '"${wheel}[grpc,cri]"' in installs[0]
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert {"grpc", "cri"} <= extras.keys()


def test_modules_are_compiled_at_build_time_and_never_at_run_time() -> None:
    _, (builder, final) = load()
    assert final.env()["PYTHONDONTWRITEBYTECODE"] == "1"
    (compiled,) = [run for run in builder.all("RUN") if "compileall" in run]
    # unchecked-hash: the interpreter never compares a .pyc with its source, so the
    # copy into the final stage (file times) cannot make them stale.
    assert "--invalidation-mode unchecked-hash" in compiled
    assert f"{VENV}/lib" in compiled
    # after the install and after pip is gone, in the builder's last RUN
    assert builder.all("RUN")[-1] is compiled
    assert compiled.index("pip install") < compiled.index("pip uninstall")
    assert compiled.index("pip uninstall") < compiled.index("compileall")


def test_the_ca_bundle_and_pip_config_are_build_secrets_not_layers() -> None:
    _, found = load()
    for stage in found:
        for source in stage.all("COPY") + stage.all("ADD"):
            assert not re.search(r"\.(crt|pem)\b|pip\.conf", source), source
        for run in stage.all("RUN"):
            if re.search(r"\bpip (install|wheel)\b", run):
                assert "--mount=type=secret,id=hostca" in run, run
                assert "--mount=type=secret,id=pipconf" in run, run


def test_the_files_the_build_copies_exist() -> None:
    _, found = load()
    sources = [
        word
        for stage in found
        for copy in stage.all("COPY")
        if not copy.startswith("--from=")
        for word in copy.split()[:-1]
    ]
    assert sources
    for source in sources:
        assert (REPO / source).exists(), f"Containerfile copies {source}, which does not exist"


# -- the script, without podman ---------------------------------------------------------


def script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_help_lists_every_option_the_script_accepts() -> None:
    accepted = re.findall(r"^\s+(--[a-z-]+)\)", SCRIPT.read_text(), flags=re.MULTILINE)
    assert len(accepted) >= 10
    done = script("--help")
    assert done.returncode == 0, done.stderr
    for option in accepted:
        assert re.search(rf"^\s+{option}\b", done.stdout, flags=re.MULTILINE), option


@pytest.mark.parametrize(
    ("args", "said"),
    [
        pytest.param(["--bogus"], "unknown argument '--bogus'", id="unknown-option"),
        pytest.param(["--tag"], "--tag needs a value", id="missing-value"),
        pytest.param(["--smoke", "maybe"], "--smoke maybe: must be auto, yes or no", id="smoke"),
        pytest.param(["--ca", "/nonexistent/ca.pem"], "--ca /nonexistent/ca.pem: no such", id="ca"),
    ],
)
def test_the_script_refuses_bad_arguments_by_name(args: list[str], said: str) -> None:
    done = script(*args)
    assert done.returncode == 1
    assert said in done.stderr
    assert "podman build" not in done.stderr


# -- the image, built --------------------------------------------------------------------

BASE = "localhost/probemarker-base:bookworm"  # the script's default --base-name
TEST_IMAGE = "localhost/probemarker-test"
TEST_TAG = "pytest"


def _why_not_build() -> str | None:
    if os.environ.get("PROBEMARKER_SKIP_IMAGE_BUILD"):
        return "PROBEMARKER_SKIP_IMAGE_BUILD is set"
    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install podman mmdebstrap): image not built"
    if os.geteuid() != 0:
        return "not root: the script's checks mount the image (podman image mount, chroot)"
    if shutil.which("mmdebstrap") is None:
        exists = subprocess.run(["podman", "image", "exists", BASE], timeout=60, check=False)
        if exists.returncode != 0:
            return f"neither mmdebstrap nor the base image {BASE} is here"
    return None


WHY_NOT = _why_not_build()


@pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")
@pytest.mark.timeout(900)
def test_the_image_builds_and_runs_read_only_as_its_user() -> None:
    """The whole script, no layer cache (about a minute with the base made, another 20 s
    to make the base the first time); the smoke run of the daemon from the image against
    the sim where kubectl is there. Needs the package index (pip in the build)."""
    smoke = "yes" if shutil.which("kubectl") else "no"
    ref = f"{TEST_IMAGE}:{TEST_TAG}"
    try:
        done = subprocess.run(
            [
                "bash",
                str(SCRIPT),
                "--image",
                TEST_IMAGE,
                "--tag",
                TEST_TAG,
                "--no-cache",
                "--smoke",
                smoke,
                "--sim-python",
                sys.executable,
            ],
            capture_output=True,
            text=True,
            timeout=840,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        assert done.stdout.strip().splitlines()[-1] == ref
        said = done.stderr
        assert f"--version -> probemarker {__version__}" in said
        assert "every setting listed" in said
        assert "nothing was written to the image's file system" in said
        # kubernetes_asyncio and the rest of the sim extra stay out (issue 24: 225 -> 175 MB)
        assert "import kubernetes_asyncio, celpy, lark, re2, cryptography: each not found" in said
        if smoke == "yes":
            assert "the daemon labelled pod smoke-0" in said
        size = re.search(rf"image {re.escape(ref)}: (\d+) MB", said)
        assert size, said[-2000:]
        assert re.search(r"/opt/probemarker: \d+ MB; largest in site-packages \(MB\): \w", said)
    finally:
        subprocess.run(["podman", "rmi", "--force", ref], capture_output=True, timeout=120)
