"""The PodProbeMarker API, all pure: what a valid marker is (`rules`, with Kubernetes'
name rules in `names` and `{{.Result}}` in `template`), the typed model (`model`) and
its parser (`parse`; text split into documents by `documents`), the validation
(`validation`, over `handlervalidation`, `labelvalidation` and `fieldchecks`, reading
with `fields`), and the CRD (`crd`, over `probeschema` and `schemaparts`)."""
