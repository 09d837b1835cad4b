"""Probe: run one check against one container and say what came of it.

`handler.py` is the seam (a `ProbeHandler` per kind of action), `outcome.py` the
values; one module per handler (`exec.py`; HTTP, TCP and gRPC plug in the same way).
"""
