"""`pip install probemarker` with no extra: the daemon and `validate` work; `demo` and
`sim` say in one line which extra to install (exit 2). Each command runs in a child
whose imports are limited to the base dependencies (tests/plain_install.py)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests import plain_install
from tests.rbac_check import REPO

# What the daemon must never need: the sim extra's (kubernetes_asyncio among them: the
# demo's, the sim's and the tests' client) and the grpc and cri extras' (loaded only
# when a grpc probe runs or --exec-backend cri is chosen, each saying which extra).
NOT_BASE = ("kubernetes_asyncio", "celpy", "lark", "re2", "cryptography", "grpc", "google")

SIM_EXTRA_LINE = re.compile(
    r"probemarker (demo|sim) needs the sim extra: pip install 'probemarker\[sim\]' "
    r"\(missing module '[\w.]+'\)"
)


def plain(*args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
    """`probemarker ARGS...`, or `python -c CODE`, in a plain install."""
    return subprocess.run(
        plain_install.command(*args) if code is None else plain_install.script(code),
        env=plain_install.environment(os.environ),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize("module", NOT_BASE)
def test_the_base_dependencies_leave_out_the_extras(module: str) -> None:
    assert module not in plain_install.base_modules()


def test_the_base_dependencies_are_what_the_daemon_talks_with() -> None:
    assert {"aiohttp", "anyio", "structlog", "orjson", "yaml", "prometheus_client"} <= (
        plain_install.base_modules()
    )


@pytest.mark.parametrize("module", ["kubernetes_asyncio", "celpy", "grpc", "pytest"])
def test_the_child_cannot_import_what_a_plain_install_lacks(module: str) -> None:
    """The harness itself."""
    done = plain(code=f"import {module}")
    assert done.returncode == 1
    assert f"ModuleNotFoundError: No module named {module!r}" in done.stderr


def test_run_help() -> None:
    done = plain("run", "--help")
    assert (done.returncode, done.stderr) == (0, "")
    assert "--shutdown-grace-seconds" in done.stdout


def test_validate_the_examples() -> None:
    examples = sorted(str(path) for path in (REPO / "manifests" / "examples").glob("*.yaml"))
    done = plain("validate", *examples)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout
    assert done.stdout.count("OK ") >= len(examples)


def test_check_needs_no_extra() -> None:
    """`probemarker check` is the daemon's code run once: a plain install has it."""
    done = plain("check", "--help")
    assert (done.returncode, done.stderr) == (0, "")
    assert "--via-api-proxy" in done.stdout
    done = plain("check", "-f", str(REPO / "manifests/examples/readiness-gate.yaml"), "--pod", "x")
    assert "ModuleNotFoundError" not in done.stderr
    assert "sim extra" not in done.stderr


def test_crd() -> None:
    done = plain("crd")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (REPO / "manifests/crd/podprobemarkers.probemarker.io.yaml").read_text()


def test_every_daemon_module_imports() -> None:
    """All of probemarker but the sim and the demo (the sim extra's), as the image's
    check does (hack/build-image.sh), and `run` up to its settings."""
    script = (
        "import importlib, pkgutil, probemarker\n"
        "skip = ('probemarker.sim', 'probemarker.demo', 'probemarker.__main__',\n"
        # grpc's: runtime_v1_pb2 is protobuf's generated code (the cri extra), generate.py
        # runs grpc_tools (the test extra); the daemon loads them only for the cri backend.
        "        'probemarker.cri.runtime_v1_pb2', 'probemarker.cri.generate')\n"
        "names = [m.name for m in pkgutil.walk_packages(probemarker.__path__, 'probemarker.')\n"
        "         if not m.name.startswith(skip)]\n"
        "for name in names: importlib.import_module(name)\n"
        "print(len(names))\n"
    )
    done = plain(code=script)
    assert (done.returncode, done.stderr) == (0, "")
    assert int(done.stdout) > 50


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["demo"], id="demo"),
        pytest.param(["demo", "--fast"], id="demo-fast"),
        pytest.param(["sim", "serve", "--port", "0", "--kubeconfig-out", "x"], id="sim-serve"),
        pytest.param(["sim", "--help"], id="sim-help"),
    ],
)
def test_demo_and_sim_name_the_extra_in_one_line(args: list[str]) -> None:
    done = plain(*args)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert SIM_EXTRA_LINE.fullmatch(line), line
    assert line.startswith(f"probemarker {args[0]} needs the sim extra")


def test_demo_help_needs_no_extra() -> None:
    done = plain("demo", "--help")
    assert (done.returncode, done.stderr) == (0, "")
    assert "Needs the sim extra: pip install 'probemarker[sim]'." in " ".join(done.stdout.split())
