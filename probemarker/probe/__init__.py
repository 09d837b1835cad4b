"""Probe: run one check against one container and say what came of it.

`handler.py` is the seam (a `ProbeHandler` per kind of action), `outcome.py` the
values (pure), `runner.py` picks the handler and bounds the run, `limits.py` the time
limit and its graces (pure), `output.py` what a run wrote made safe to show (pure).
One module per handler: `exec.py` (through `pods/exec`: the stream in `execstream.py`,
what it reports in `execresult.py`, the exec results `cri.py` reports too) and `cri.py` (through the
container runtime, `criid.py` choosing the container, pure), and `http.py` (with its
keep-alive pool, `httppool.py`), `tcp.py`, `grpc.py`, which connect from the daemon
to the pod IP only (`ports.py` finds the address). An exec command that may still
run after its run ended is held: `holds.py` (`CommandHolds`: when a hold starts and
ends, the pod's record of it), `holdtable.py` (the holds kept by command and by
namespace, fair by namespace; their settings and counters), `turns.py` (the runs of
one command in one container, one at a time).
"""
