"""The house holds its own shape (docs/architecture.md).

- Importing a pure stage loads no I/O: no event loop, no network library, not the
  API client, not the container runtime's, not the sim. Each import runs in a fresh
  interpreter, so what another test loaded cannot hide what the stage loads. The pure
  stages and what they may not load are the import contract's "pure-stages" (one
  list, in pyproject.toml; a package named there is pure in every module).
- The import contract in pyproject.toml ([tool.importlinter]) holds: `lint-imports`
  passes (.ci/run runs it too; here it also fails a plain `pytest`).
- No module takes a private name (`_x`) from another module of ours: what a room
  offers another is public, or it stays where it is used.
- kit/ imports nothing of probemarker's but kit/ (the import contract lists the other
  rooms; this also catches `from probemarker import __version__`).
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONTRACT = "pure-stages"  # pyproject.toml's [tool.importlinter]: the one list of the pure


def _contract(contract_id: str) -> dict[str, list[str]]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        contracts = tomllib.load(file)["tool"]["importlinter"]["contracts"]
    found: dict[str, list[str]] = next(c for c in contracts if c["id"] == contract_id)
    return found


def _modules(name: str) -> list[str]:
    """`name` if it is a module, else every module of the package `name` (the contract
    names a whole package where all of it is pure)."""
    path = ROOT.joinpath(*name.split("."))
    if not path.is_dir():
        return [name]
    return sorted(
        ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for f in path.rglob("*.py")
    )


PURE_STAGES = _contract(CONTRACT)
PURE = [module for name in PURE_STAGES["source_modules"] for module in _modules(name)]
# Libraries that do I/O, and our modules that do: what the contract forbids them.
IO = tuple(m for m in PURE_STAGES["forbidden_modules"] if not m.startswith("probemarker"))
OURS_IO = tuple(m for m in PURE_STAGES["forbidden_modules"] if m.startswith("probemarker"))

_LOADED = """
import json, sys
before = set(sys.modules)
import {module}
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def loaded_by(module: str) -> list[str]:
    """The modules a fresh interpreter loads to import `module`."""
    answer = subprocess.run(
        [sys.executable, "-c", _LOADED.format(module=module)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    found: list[str] = json.loads(answer.stdout)
    return found


def test_the_pure_list_is_read_from_the_contract() -> None:
    assert "probemarker.write.desired" in PURE
    assert "probemarker.api.model" in PURE  # a package named whole: each of its modules
    assert "probemarker.api" in PURE
    assert "asyncio" in IO
    assert "probemarker.kube" in OURS_IO


@pytest.mark.parametrize("module", PURE)
def test_a_pure_stage_loads_no_io(module: str) -> None:
    loaded = loaded_by(module)
    assert module in loaded
    io = [m for m in loaded if m.split(".")[0] in IO or m.startswith(OURS_IO)]
    assert io == [], f"importing {module} loads {io}: move the code that needs them"


def test_the_check_sees_io_where_there_is_some() -> None:
    """The same check finds the client where it is loaded: it is no test that cannot fail."""
    loaded = loaded_by("probemarker.probe.exec")
    assert "aiohttp" in loaded
    assert "probemarker.kube.connect.client" in loaded


@pytest.mark.timeout(120)
def test_the_import_contract_holds() -> None:
    tool = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(tool).exists():
        pytest.fail("lint-imports is not installed: pip install -e '.[test]'")
    answer = subprocess.run(
        [tool, "--no-cache"], capture_output=True, text=True, cwd=ROOT, timeout=110
    )
    assert answer.returncode == 0, answer.stdout[-4000:] + answer.stderr[-2000:]
    assert "0 broken" in answer.stdout


def _ours(path: Path) -> list[tuple[int, str, str]]:
    """What `path` imports of ours, as (line, module, name); name "" for `import M`
    (absolute imports only: we use no others)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "probemarker":
            found += [(node.lineno, node.module or "", alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name, "")
                for a in node.names
                if a.name.split(".")[0] == "probemarker"
            ]
    return found


def test_no_module_takes_a_private_name_of_another() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {module}.{name}"
        for path in sorted((ROOT / "probemarker").rglob("*.py"))
        for line, module, name in _ours(path)
        if name.startswith("_") and not name.startswith("__")
    ]
    assert found == []


def test_the_ground_floor_imports_nothing_of_ours_but_itself() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {module} {name}"
        for path in sorted((ROOT / "probemarker" / "kit").rglob("*.py"))
        for line, module, name in _ours(path)
        if not module.startswith("probemarker.kit")
    ]
    assert found == []
    assert _ours(ROOT / "probemarker" / "kube" / "write" / "events.py")  # the scan sees imports
