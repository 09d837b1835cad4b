"""The HTTP side of the sim: routing (`app`), request parsing (`requestinfo`), the
resource verbs (`resources`, `watching`, `deletion`; request bodies and options in
`admission` and `writeoptions`), discovery and OpenAPI, Table
output, faults, accounting and TLS."""
