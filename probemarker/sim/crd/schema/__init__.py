"""The structural schema of a CRD version and what it does to a custom resource, as
apiextensions-apiserver's pkg/apiserver/schema (with its pruning, defaulting, objectmeta
and listtype packages) and pkg/apiserver/validation (kube-openapi value validation) do it.

`node` parses an openAPIV3Schema into `SchemaNode`s; `prune` prunes and defaults an
object, `values` validates it (string `formats`, list-type uniqueness), `meta` checks its
ObjectMeta; `structural.StructuralSchema` compiles one version's schema once and admits a
custom resource through all of them and its x-kubernetes-validations rules (`cel/`,
pkg/apiserver/schema/cel).
"""
