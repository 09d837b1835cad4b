"""A request as the API server reads it, and the Status it refuses one with: the path
and method parsed into a `RequestInfo` (`requestinfo`, k8s.io/apiserver's
endpoints/request), the protobuf bodies kubectl sends decoded (`protobuf`), and the
`Status` bodies of the server's own refusals, rendered as responses (`status`).

The server's ground floor: every other room of the server uses it,
and it uses none of them.
"""
