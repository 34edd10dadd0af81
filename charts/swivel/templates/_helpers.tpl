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
Least privilege: named verbs and resources only, no wildcards, each verb one the operator's
code (or kopf for it) calls; docs/security.md lists the call behind every verb, and
tests/chart/test_rbac.py and tests/integration/operator/test_least_privilege.py hold the
chart to it.
*/}}
{{- define "swivel.rules" -}}
# StreamJobs: kopf lists and watches them and patches their finalizers and annotations;
# the operator reads one by name (a Reconfiguration's job).
- apiGroups: ["swivel.dev"]
  resources: ["streamjobs"]
  verbs: ["get", "list", "watch", "patch"]
# Reconfigurations: the same, plus create for those edits and policies generate.
- apiGroups: ["swivel.dev"]
  resources: ["reconfigurations"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: ["swivel.dev"]
  resources: ["streamjobs/status", "reconfigurations/status"]
  verbs: ["patch"]
# Children name their StreamJob as owner with blockOwnerDeletion, which the API server
# (OwnerReferencesPermissionEnforcement) allows only to who may update its finalizers.
- apiGroups: ["swivel.dev"]
  resources: ["streamjobs/finalizers"]
  verbs: ["update"]
# The driver pod: read, created, replaced (deleted) by the operator. list, watch and
# deletecollection only because the driver's Role (operator/access.py DRIVER_RULES) has
# them: Kubernetes lets nobody grant a right it does not hold.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "delete", "deletecollection"]
# The other children: created (or patched when they exist), deleted by the finalizer.
- apiGroups: [""]
  resources: ["services", "configmaps", "serviceaccounts"]
  verbs: ["create", "patch", "delete"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["create", "patch", "delete"]
# The checkpoint claim: created once, never patched, deleted by the finalizer.
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["create", "delete"]
# The job's credentials Secret, read by its name only: created once, never patched. No
# list or watch (nobody's Secrets are enumerated) and no delete (garbage collection
# removes it with its StreamJob).
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create"]
# Each job's NetworkPolicy (only its own pods and the operator reach it): created, or
# patched when it exists; garbage-collected with its StreamJob.
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["create", "patch"]
# Kubernetes Events for every transition (kopf posts core v1 Events).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
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

{{/* The images StreamJobs may run, comma-separated: imagePolicy.allowedImages, or the chart's own repository. */}}
{{- define "swivel.allowedImages" -}}
{{- if .Values.imagePolicy.allowedImages }}
{{- .Values.imagePolicy.allowedImages | uniq | join "," }}
{{- else }}
{{- .Values.image.repository }}
{{- end }}
{{- end }}
