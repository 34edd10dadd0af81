{{/* The chart name, shortened to a DNS label. */}}
{{- define "swivel.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every resource name: the release name, plus the chart name if absent. */}}
{{- define "swivel.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "swivel.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that never change for a release: the Deployment's selector. */}}
{{- define "swivel.selectorLabels" -}}
app.kubernetes.io/name: {{ include "swivel.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "swivel.labels" -}}
helm.sh/chart: {{ include "swivel.chart" . }}
{{ include "swivel.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: swivel
{{- end }}

{{- define "swivel.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "swivel.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "swivel.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The namespaces watched in namespaced mode, as a JSON list (the release namespace by default). */}}
{{- define "swivel.watchNamespaces" -}}
{{- if .Values.watch.namespaces }}
{{- .Values.watch.namespaces | uniq | toJson }}
{{- else }}
{{- list .Release.Namespace | toJson }}
{{- end }}
{{- end }}

{{/*
The operator's rights, shared by the ClusterRole (cluster-wide) and the per-namespace Roles.
Least privilege: named verbs and resources only, no wildcards. docs/packaging.md explains
every rule; docs/operator.md lists what the handlers call.
*/}}
{{- define "swivel.rules" -}}
# StreamJobs and Reconfigurations: watched by kopf, patched for status and finalizers;
# create for the Reconfigurations that policies (rebalance, memory, AIMD) generate.
- apiGroups: ["swivel.dev"]
  resources: ["streamjobs", "reconfigurations"]
  verbs: ["get", "list", "watch", "create", "patch", "update"]
- apiGroups: ["swivel.dev"]
  resources:
    - streamjobs/status
    - streamjobs/finalizers
    - reconfigurations/status
    - reconfigurations/finalizers
  verbs: ["get", "patch", "update"]
# The children of a StreamJob: driver Pod, Service, ConfigMaps (job, executor pod template),
# Secret (agent token), ServiceAccount. The Role each driver gets (operator/rendering.py
# DRIVER_RULES: pods, services, configmaps, persistentvolumeclaims, with deletecollection)
# must be held by the operator itself: Kubernetes refuses to let it grant more than it has.
- apiGroups: [""]
  resources: ["pods", "services", "configmaps", "persistentvolumeclaims"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete", "deletecollection"]
- apiGroups: [""]
  resources: ["secrets", "serviceaccounts"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
# The driver's Role and RoleBinding (it creates and deletes its executors).
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
# Kubernetes Events for every transition (kopf posts core events; both APIs allowed).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/* kopf peering objects, only when the operator runs without --standalone. */}}
{{- define "swivel.peeringRules" -}}
- apiGroups: ["kopf.dev"]
  resources: [{{ if .Values.watch.clusterWide }}"clusterkopfpeerings"{{ else }}"kopfpeerings"{{ end }}]
  verbs: ["get", "list", "watch", "patch"]
{{- end }}

{{/* kopf's resource discovery: it watches CRDs to notice new or changed kinds. Read-only. */}}
{{- define "swivel.discoveryRules" -}}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["get", "list", "watch"]
{{- end }}
