{{/* The chart's name, as app.kubernetes.io/name. */}}
{{- define "sprout.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: the release name when it holds the
chart's name ("sprout" installs objects named as deploy/ names them).
*/}}
{{- define "sprout.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "sprout.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "sprout.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "sprout.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sprout.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The labels that select the main Deployment's pods. Every object carries
them (sprout.labels): the ServiceMonitor finds each shard's metrics Service
by them.
*/}}
{{- define "sprout.selectorLabels" -}}
{{ include "sprout.podSelectorLabels" (dict "root" . "shard" "") }}
{{- end }}

{{/*
The labels that select the pods of one Deployment. A shard's name is
<name>-<shard>, as deploy/sharding names it, so that no two Deployments
select the same pods. Takes root (the chart's context) and shard ("" for
the main Deployment).
*/}}
{{- define "sprout.podSelectorLabels" -}}
app.kubernetes.io/name: {{ include "sprout.name" .root }}{{ with .shard }}-{{ . }}{{ end }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{- define "sprout.labels" -}}
{{ include "sprout.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The label that adds a ClusterRole's rules to Sprout's role. */}}
{{- define "sprout.aggregateLabel" -}}
rbac.sprout.dev/aggregate-to-sprout: "true"
{{- end }}

{{- define "sprout.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
A Role with one rule in a namespace, bound to Sprout's ServiceAccount. Takes
root (the chart's context), name, namespace and rule.
*/}}
{{- define "sprout.boundRole" -}}
{{- $root := .root }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "sprout.labels" $root | nindent 4 }}
rules:
- {{ toYaml .rule | nindent 2 | trim }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "sprout.labels" $root | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .name }}
subjects:
- kind: ServiceAccount
  name: {{ include "sprout.serviceAccountName" $root }}
  namespace: {{ $root.Release.Namespace }}
{{- end }}
