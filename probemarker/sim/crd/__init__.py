"""CustomResourceDefinitions as kube-apiserver handles them.

`definition` checks a CRD on create; `schema.structural.StructuralSchema.admit` prunes, defaults
and validates custom resources (`values` for OpenAPI, `rules` for
x-kubernetes-validations on the CEL engine in `schema/cel/`). Pure: serving a resource when
its CRD comes and goes is the server's (probemarker.sim.server.crdserving).
"""
