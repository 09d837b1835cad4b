{{/*
The labels every object carries: exactly those of manifests/ (no helm.sh/chart or
release labels), so that the chart and `kubectl apply -k` render the same objects
(tests/manifests/test_chart.py).
*/}}
{{- define "probemarker.labels" -}}
app.kubernetes.io/name: probemarker
{{- end }}

{{- define "probemarker.daemonLabels" -}}
app.kubernetes.io/name: probemarker
app.kubernetes.io/component: daemon
{{- end }}

{{/* The image reference: repository:tag, the tag defaulting to appVersion. */}}
{{- define "probemarker.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Settings that only make sense together, refused with a message naming them. */}}
{{- define "probemarker.validate" -}}
{{- if and .Values.cri.dropExecRule (ne .Values.execBackend "cri") }}
{{- fail "cri.dropExecRule: true needs execBackend: cri (the api backend runs exec probes through pods/exec)" }}
{{- end }}
{{- end }}
