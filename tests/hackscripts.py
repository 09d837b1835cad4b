"""The scripts of hack/ as modules, for the tests that call their functions: they are
scripts, not a package, so they are loaded from their files."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

HACK = Path(__file__).resolve().parents[1] / "hack"


def load_hack(script: str) -> ModuleType:
    """hack/`script` (e.g. "helm.py") loaded afresh as a module of its own."""
    path = HACK / script
    name = "hack_" + path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
