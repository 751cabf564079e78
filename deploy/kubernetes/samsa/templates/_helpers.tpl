{{- define "samsa.name" -}}{{ .Release.Name }}{{- end -}}
{{- define "samsa.headless" -}}{{ .Release.Name }}-headless{{- end -}}
{{- define "samsa.labels" -}}
app.kubernetes.io/name: samsa
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{/* id@host:port of every voter: the pods' stable DNS names under the headless Service. */}}
{{- define "samsa.voters" -}}
{{- $root := . -}}
{{- $out := list -}}
{{- range $i := until (int .Values.replicas) -}}
{{- $out = append $out (printf "%d@%s-%d.%s.%s.svc.cluster.local:%d" $i (include "samsa.name" $root) $i (include "samsa.headless" $root) $root.Release.Namespace (int $root.Values.ports.controller)) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}
