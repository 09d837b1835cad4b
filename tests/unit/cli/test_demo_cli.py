"""`probemarker demo` as a newcomer meets it: `--help` says what it does and how it
ends; without the sim extra it says which extra to install, in one line (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from probemarker.cli import main
from tests.rbac_check import REPO


def test_demo_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["demo", "--help"])
    assert exited.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("usage: probemarker demo [-h] [--fast] [--plain] [--log-file FILE]")
    for fragment in (
        "three example markers",
        "130: stopped by Ctrl-C",
        "Exec commands run on this host",
    ):
        assert fragment in out


def test_the_demo_is_listed_among_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "demo" in capsys.readouterr().out


@pytest.mark.parametrize("missing", ["kubernetes_asyncio", "celpy", "re2", "lark"])
def test_without_the_sim_extra_it_names_the_extra(missing: str) -> None:
    # A process of its own: the sim's modules are loaded in this one already.
    script = (
        f"import sys; sys.modules[{missing!r}] = None\n"  # importing it: ModuleNotFoundError
        "from probemarker.cli import main\n"
        "sys.exit(main(['demo', '--fast']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        "probemarker demo needs the sim extra: pip install 'probemarker[sim]' "
        f"(missing module {missing!r})"
    ]
