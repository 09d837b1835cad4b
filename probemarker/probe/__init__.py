"""Probe: run one check against one container and say what came of it.

`handler.py` is the seam (a `ProbeHandler` per kind of action), `outcome.py` the
values, `runner.py` picks the handler and bounds the run; one module per handler:
`exec.py` (through `pods/exec`), and `http.py`, `tcp.py`, `grpc.py`, which connect
from the daemon to the pod IP only (`ports.py` finds the address).
"""
