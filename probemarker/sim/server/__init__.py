"""The HTTP side of the sim: routing (`app`), request parsing (`requestinfo`), the
resource verbs (`resources`, `watching`, `deletion`; request bodies and options in
`admission` and `writeoptions`), the defaults of built-in kinds (`defaults`, with a
pod's QoS class in `qos`), custom resources served from their CRDs (`crdserving`),
discovery and OpenAPI, Table output, faults, accounting and TLS."""
