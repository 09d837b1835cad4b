"""x-kubernetes-validations: the CEL rules of a CRD schema, as apiextensions-apiserver's
pkg/apiserver/schema/cel compiles, checks and runs them.

`engine` is Kubernetes-flavoured CEL on cel-python (values converted by schema, cel-go's
`has()` and error texts) with the Kubernetes `library` functions; `rules` compiles every
rule of a schema once and evaluates them over an object (the Validator); `fieldpath` is
ValidFieldPath; `celcheck/` type-checks a rule and estimates its cost as cel-go does.
"""
