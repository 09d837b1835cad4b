"""`probemarker` as `pip install probemarker` (no extras) leaves it, without a fresh venv.

A child Python whose imports are limited to the standard library, probemarker itself
and the distributions that the `[project] dependencies` of pyproject.toml bring
(transitively, as installed here). Anything else (kubernetes_asyncio, the sim's
cel-python, lark, google-re2 and cryptography, grpcio, protobuf, pytest, ...) is not
found, as if it were not installed: before probemarker is imported, the path finder
on `sys.meta_path` is replaced by one that finds nothing outside those names. So an optional import (`try: import brotli`,
yarl's `find_spec("pydantic_core")`) sees what it would see in a plain install.

Why not a fresh venv: it would need the package index on every run, and it would test
the index's current releases rather than the checkout's declared dependencies. The
allowed set is read from the checkout's pyproject.toml, not from the installed
metadata, which a venv made before a change of the dependencies still carries.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Mapping, Sequence
from importlib import metadata

from packaging.requirements import Requirement

from tests.rbac_check import REPO

ALLOWED_VARIABLE = "PROBEMARKER_TEST_ALLOWED_MODULES"

# The child's first lines (the variable is ALLOWED_VARIABLE's): only the standard
# library is imported before the finder is in place.
FINDER = """
import os, sys
from importlib.machinery import PathFinder
allowed = set(os.environ["PROBEMARKER_TEST_ALLOWED_MODULES"].split(","))
allowed |= set(sys.stdlib_module_names) | {"probemarker"}
class BaseOnly(PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] not in allowed:
            return None
        return super().find_spec(name, path, target)
sys.meta_path[:] = [BaseOnly if finder is PathFinder else finder for finder in sys.meta_path]
"""


# A child where the top-level modules in HIDDEN_VARIABLE (comma-separated) are not found
# and everything else is: one missing piece of an extra, the rest installed.
HIDDEN_VARIABLE = "PROBEMARKER_TEST_HIDDEN_MODULES"
HIDER = """
import os, sys
from importlib.machinery import PathFinder
hidden = set(os.environ["PROBEMARKER_TEST_HIDDEN_MODULES"].split(","))
class Hiding(PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] in hidden:
            return None
        return super().find_spec(name, path, target)
sys.meta_path[:] = [Hiding if finder is PathFinder else finder for finder in sys.meta_path]
"""


def _normal(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def base_distributions() -> frozenset[str]:
    """The distributions `pip install probemarker` installs: the checkout's `[project]
    dependencies` and theirs, as installed here, markers evaluated with no extra."""
    with (REPO / "pyproject.toml").open("rb") as handle:
        declared = tomllib.load(handle)["project"]["dependencies"]
    todo = [Requirement(line) for line in declared]
    seen: set[str] = set()
    while todo:
        requirement = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = _normal(requirement.name)
        if name not in seen:
            seen.add(name)
            todo.extend(Requirement(line) for line in metadata.requires(name) or [])
    return frozenset(seen)


def base_modules() -> frozenset[str]:
    """The top-level import names of `base_distributions()`."""
    wanted = base_distributions()
    return frozenset(
        top
        for top, distributions in metadata.packages_distributions().items()
        if any(_normal(one) in wanted for one in distributions)
    )


def command(*args: str) -> list[str]:
    """`probemarker ARGS...` in a plain install (run with `environment()`)."""
    return script("from probemarker.cli import main\nsys.exit(main(sys.argv[1:]))\n", *args)


def script(code: str, *args: str) -> list[str]:
    """`python -c CODE ARGS...` in a plain install (run with `environment()`)."""
    return [sys.executable, "-c", FINDER + code, *args]


def environment(base: Mapping[str, str]) -> dict[str, str]:
    """`base` with the allowed modules for the finder, and this checkout importable."""
    return {**base, ALLOWED_VARIABLE: ",".join(sorted(base_modules())), "PYTHONPATH": str(REPO)}


def command_without(hidden: Sequence[str], *args: str) -> list[str]:
    """`probemarker ARGS...` where the modules `hidden` are not found (run with
    `environment_without(hidden, ...)`); the rest of this environment is there."""
    code = "from probemarker.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return [sys.executable, "-c", HIDER + code, *args]


def environment_without(hidden: Sequence[str], base: Mapping[str, str]) -> dict[str, str]:
    """`base` naming the `hidden` modules for `command_without`'s finder."""
    return {**base, HIDDEN_VARIABLE: ",".join(hidden), "PYTHONPATH": str(REPO)}
