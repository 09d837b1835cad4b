"""Go-compatible text: what the CRD checks and the server print and read as Go does.

`fielderr` is k8s.io/apimachinery's field.Error (with Go's %v, %q and encoding/json
renderings of a value), `gorepr` Go's %#v of the values apiextensions validation shows,
and `gojson` the decoding of a request body into Go types as sigs.k8s.io/json does it.
No apiextensions-apiserver package of its own: the ground under the rest of crd/.
"""
