"""Writing results to pods (docs/engine.md): decided probes -> desired pod state -> one patch.

Pure: `desired` (desired labels, annotations, conditions, the new record, conflicts:
the pass over a pod's owners), `claims` (the claims board: claims, conflicts, keeping,
hand-over, removal candidates), `room` (the 256 KiB annotation room: what fits, what is
refused by size), `ownership` (the record annotation: parsed, rendered, fitted),
`tokens` (what the record keeps of a value), `ours` (the ownership rule: what of the
record the pod still shows), `patch` (the minimal guarded JSON patch), `restrict` (a
patch narrowed after a refusal; message-only changes deferred), `pending` (why a
write waits).
Not pure: `queue` (the pods waiting for a write, taken in turn by namespace, on the
clock), `writer` (coalesced pods/status patches under the write budget), `flush` (one
flush and its retries, through the API client).
"""
