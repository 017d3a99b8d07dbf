{{/*
Render-time checks: a bad value fails `helm install`/`helm template` with a message naming it,
instead of an operator that exits at start-up or two replicas reconciling at once.
*/}}
{{- define "noctaya.validate" -}}
{{- if hasKey .Values.gateway "scalerMode" -}}
{{- fail "gateway.scalerMode has been removed; Noctaya always uses KEDA External Push" -}}
{{- end -}}
{{- $operatorReplicas := include "noctaya.replicas" (list "operator.replicas" .Values.operator.replicas) | int64 -}}
{{- $_ := include "noctaya.replicas" (list "gateway.replicas" .Values.gateway.replicas) -}}
{{- if not (kindIs "bool" .Values.operator.leaderElect) -}}
{{- fail (printf "operator.leaderElect must be true or false, got %s" (toJson .Values.operator.leaderElect)) -}}
{{- end -}}
{{- if and (gt $operatorReplicas 1) (not .Values.operator.leaderElect) -}}
{{- fail "operator.replicas > 1 requires operator.leaderElect=true: without leader election every replica would reconcile" -}}
{{- end -}}
{{- end -}}

{{/*
A replica count as an integer, or a failure: Kubernetes replica fields are int32 and Noctaya
needs at least one replica. Numbers from values files arrive as float64, from --set as int64.
Usage: include "noctaya.replicas" (list "<values path>" <value>)
*/}}
{{- define "noctaya.replicas" -}}
{{- $name := index . 0 -}}
{{- $value := index . 1 -}}
{{- $problem := printf "%s must be an integer between 1 and 2147483647, got %s" $name (toJson $value) -}}
{{- if not (or (kindIs "float64" $value) (kindIs "int64" $value) (kindIs "int" $value)) -}}
{{- fail $problem -}}
{{- end -}}
{{- $number := float64 $value -}}
{{- if or (lt $number 1.0) (gt $number 2147483647.0) (ne $number (float64 (int64 $number))) -}}
{{- fail $problem -}}
{{- end -}}
{{- int64 $value -}}
{{- end -}}

{{- define "noctaya.labels" -}}
app.kubernetes.io/name: noctaya
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The kustomize selector, so that both packagings select the same pods. */}}
{{- define "noctaya.operatorSelector" -}}
app.kubernetes.io/name: noctaya
app.kubernetes.io/component: operator
{{- end -}}

{{- define "noctaya.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default "noctaya-controller-manager" -}}
{{- end -}}

{{/* Usage: include "noctaya.image" (list . .Values.image.operator) */}}
{{- define "noctaya.image" -}}
{{- $root := index . 0 -}}
{{- $image := $root.Values.image -}}
{{- $tag := $image.tag | default $root.Chart.AppVersion | toString -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $image.registry) (index . 1) $tag -}}
{{- end -}}

{{/* Subjects of every operator role binding. */}}
{{- define "noctaya.subjects" -}}
subjects:
- kind: ServiceAccount
  name: {{ include "noctaya.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}
