"""Match: which markers' probes apply to which containers of a pod (`match.py`), and the
identities that name a probe on a pod from here on (`identity.py`, docs/engine.md). Pure."""
