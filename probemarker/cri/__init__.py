"""The container runtime edge: a CRI (runtime.v1) client over the node's runtime socket.

`endpoint` parses `--cri-endpoint`; `client.RuntimeClient` makes the two calls the cri
exec backend needs (Version, ExecSync). grpcio is imported only when a call is made
(the optional `cri` extra). `runtime_v1.proto` is our trimmed copy of the CRI's
messages; `generate` rebuilds the `runtime_v1_pb2` modules from it (development only).
"""
