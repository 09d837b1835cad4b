"""The client layer: everything the daemon says to the API server goes through here.

- `config`: where the API server is (kubeconfig or in-cluster) -> `Connection`;
- `credentials`: the Authorization header, re-read as tokens rotate;
- `client`: the one HTTP edge (connection pools, deadlines, streams, WebSockets);
- `errors`: the one error tree, mapped once from HTTP answers;
- `tlsresume`: TLS session resumption for the many short exec connections;
- the conversations built on them: list+watch informers, the exec stream,
  status patches, events.

Nothing here imports `probemarker.sim`.
"""
