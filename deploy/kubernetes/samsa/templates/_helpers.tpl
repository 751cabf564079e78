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
{{/* The Kafka listener's security protocol, and its name: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. */}}
{{- define "samsa.protocol" -}}
{{- if .Values.sasl.enabled -}}SASL_{{- end -}}
{{- if .Values.tls.enabled -}}SSL{{- else -}}PLAINTEXT{{- end -}}
{{- end -}}
{{/* The PLAIN users: the inter-broker user first, then the others, each once. */}}
{{- define "samsa.saslUsers" -}}
{{- $out := list .Values.sasl.interBrokerUser -}}
{{- range $u := .Values.sasl.users -}}
{{- if not (has $u $out) -}}{{- $out = append $out $u -}}{{- end -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}
