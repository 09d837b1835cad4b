"""What a write becomes before the store takes it, as kube-apiserver's registry handlers
and admission make it: a create, update or patch body checked, defaulted by its kind,
validated and patched (`bodies`), the write's query options and JSON body
(`writeoptions`), and custom resources served from their CRDs: a CRD decoded, checked and
established, a custom resource pruned, defaulted and validated by its schema
(`crdserving`, apiextensions-apiserver's part, over the pure checks of `sim/crd/`).

Nothing here writes to the store. Over `kinds/` (the built-in kinds' rules), `discovery/`
(the catalog a CRD adds its resources to) and `request/`; under the handlers.
"""
