"""Match: which markers' probes apply to which containers of a pod, and the diff between
two sets of them (`match.py`; the identities it names them by are identity/'s). Pure."""
