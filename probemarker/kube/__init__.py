"""The client layer: everything the daemon says to the API server goes through here.

Four rooms, one activity each, each resting on `connect`:
- `connect/`: where the API server is (kubeconfig or in-cluster) -> `Connection`; the
  Authorization header, re-read as tokens rotate; TLS session resumption; the one HTTP
  edge (`client`: connection pools, deadlines, streams, WebSockets); the one error tree,
  mapped once from HTTP answers; the resources the daemon names;
- `watch/`: list+watch informers and their store;
- `exec/`: the `pods/exec` stream and what it reports;
- `write/`: pods/status patches, events, and the client-side write budget.

Nothing here imports `probemarker.sim` or a stage of the daemon; only `kit/` below it.
"""
