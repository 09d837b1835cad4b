"""A request as the API server reads it, and the Status it refuses one with: the path
and method parsed into a `RequestInfo` (`requestinfo`, k8s.io/apiserver's
endpoints/request), the protobuf bodies kubectl sends decoded (`protobuf`), and the
`Status` bodies of the server's own refusals, rendered as responses (`status`).

On the server's ground floor, beside `discovery/`: it uses nothing else of the server.
"""
