"""CustomResourceDefinitions as kube-apiserver handles them, grouped as apiextensions-apiserver
groups them; pure (serving a resource while its CRD exists is the server's,
probemarker.sim.server.admission.crdserving).

- `validation/`: the checks of a CRD itself on create and update (`definition`);
- `schema/`: the structural schema applied to custom resources: pruning, defaulting,
  OpenAPI value validation, ObjectMeta (`structural.StructuralSchema.admit`), with the
  x-kubernetes-validations CEL rules in `schema/cel/`;
- `gotext/`: Go-compatible text: field errors, Go's value renderings, JSON decoding.

Imports run down that list: validation uses schema and gotext, schema uses gotext.
"""
