"""Every script under hack/ parses as bash, and shellcheck (where installed) finds nothing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[2] / "hack").glob("*.sh"))


def test_the_scripts_are_found() -> None:
    assert {p.name for p in SCRIPTS} >= {"build-image.sh", "cri-runtime.sh"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_script_is_valid_bash(script: Path) -> None:
    done = subprocess.run(
        ["bash", "-n", str(script)], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not on PATH")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shellcheck_finds_nothing(script: Path) -> None:
    done = subprocess.run(
        ["shellcheck", str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout
