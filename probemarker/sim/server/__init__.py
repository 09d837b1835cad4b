"""The HTTP side of the sim: routing (`app`), request parsing (`requestinfo`), the
resource verbs (`resources`, `watching`, `deletion`), discovery and OpenAPI, Table
output, faults, accounting and TLS."""
