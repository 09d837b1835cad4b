"""probemarker.sim: a simulated Kubernetes API server for the tests and benchmarks.

`SimCluster` starts it in-process; `probemarker sim serve` (sim/cli.py) from
the command line.  See docs/sim.md.

`SimCluster` is imported lazily, so that importing a pure submodule (e.g.
`probemarker.sim.crd.schema.structural`) does not pull in the server and its aiohttp
dependency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from probemarker.sim.cluster import SimCluster

__all__ = ["SimCluster"]


def __getattr__(name: str) -> Any:
    if name == "SimCluster":
        from probemarker.sim.cluster import SimCluster

        return SimCluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
