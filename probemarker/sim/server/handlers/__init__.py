"""The handlers that answer a resource request, as k8s.io/apiserver's endpoints/handlers
and the generic registry answer it: get, list, create, update and patch (`resources`),
delete and deletecollection (`deletion`), the watch streams (`watching`), the pods/proxy
subresource (`podproxy`) and the Table a `kubectl get` asks for (`tables`).

Over `admission/` (what a write becomes), `kinds/`, `discovery/` and `request/`; under the
harness, whose faults close and stall the watch streams, and the application that routes
requests here.
"""
