"""What the API server serves, and the documents that say so: the catalog of resource
types, built-in and from established CRDs, with the legacy discovery documents built from
it (`catalog`, k8s.io/apiserver's endpoints/discovery), and the OpenAPI v3 documents
(`openapi`: every discovery path; `openapi_meta`: the meta.k8s.io/v1 schemas every
document shares and the built-in kinds' short ones; `openapi_crd`: a custom resource's
schemas, as apiextensions-apiserver's openapi builder makes them).

On the server's ground floor, beside `request/`: it uses the store's resource types and
nothing else of the server.
"""
