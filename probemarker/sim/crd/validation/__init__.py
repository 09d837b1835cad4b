"""The checks of a CustomResourceDefinition itself, made when it is created or updated, as
apiextensions-apiserver's pkg/apis/apiextensions/validation makes them (with the v1 Go types
of pkg/apis/apiextensions/v1, and the schema checks it calls in pkg/apiserver/schema).

`definition` is the entry point (ValidateCustomResourceDefinition and its update); the
request body is decoded with `crdtypes`; `crdobject` checks the metadata, status and
immutable fields, `crdspec` the names, columns, subresources, selectable fields and
conversion; `schemacheck` one schema: `newstructural` and `structural` (can it be made
structural, is it), `schemadefaults` (its defaults), `openapischema` (per node, with
`listtypes`) and `celadmit` (its CEL rules compile and fit the cost budget).
"""
