"""Writing results to pods (SPEC §3): decided probes -> desired pod state -> one patch.

Pure: `ownership` (the record annotation), `desired` (desired labels, annotations,
conditions, the new record, conflicts), `patch` (the minimal guarded JSON patch).
I/O: `writer` (coalesced, retried pods/status patches).
"""
