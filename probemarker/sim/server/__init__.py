"""The simulated API server, grouped as kube-apiserver groups its own parts:

- `app`: the aiohttp application (routing, auth, the faults and the accounting applied
  to every request);
- `harness/`: what the tests and the command line hold it by (`faults`, `accounting`,
  `tls`);
- `handlers/`: what answers a resource request (`resources`, `deletion`, `watching`,
  `podproxy`, `tables`);
- `admission/`: what a write becomes before the store takes it (`bodies`,
  `writeoptions`, and custom resources served from their CRDs, `crdserving`);
- `kinds/`: the built-in kinds' own rules (`defaults`, `qos`, `eventcheck`,
  `eventconv`);
- `discovery/`: what is served (`catalog`) and the documents that say so (`openapi`,
  `openapi_meta`, `openapi_crd`);
- `request/`: a request as read (`requestinfo`, `protobuf`) and the Status of a refusal
  (`status`).

Imports run down that list, `discovery/` and `request/` on one floor without importing
each other (the "sim-server" contract in pyproject.toml).
"""
