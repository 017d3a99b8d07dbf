{{/*
Render-time checks values.schema.json cannot state: a bad value fails `helm install`/`helm
template` with a message naming it, instead of two replicas reconciling at once.
*/}}
{{- define "noctaya.validate" -}}
{{- if hasKey .Values.gateway "scalerMode" -}}
{{- fail "gateway.scalerMode has been removed; Noctaya always uses KEDA External Push" -}}
{{- end -}}
{{- if and (gt (include "noctaya.int" .Values.operator.replicas | int64) 1) (not .Values.operator.leaderElect) -}}
{{- fail "operator.replicas > 1 requires operator.leaderElect=true: without leader election every replica would reconcile" -}}
{{- end -}}
{{- end -}}

{{/*
A whole number as digits: numbers from values files arrive as float64, which print as
2.147483647e+09; values.schema.json has checked that it is an integer.
Usage: include "noctaya.int" .Values.operator.replicas
*/}}
{{- define "noctaya.int" -}}
{{- int64 . -}}
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

{{/*
The operator flags that give every gateway its defaults, one `- --flag=value` line each, for
the values that are set. Usage: include "noctaya.gatewayDefaults" .Values.gateway
*/}}
{{- define "noctaya.gatewayDefaults" -}}
{{- range $section := list "requests" "limits" }}
{{- range $resource := list "cpu" "memory" }}
{{- with (index ($.resources | default dict) $section | default dict) }}
{{- with index . $resource }}
- --gateway-{{ $resource }}-{{ trimSuffix "s" $section }}={{ . }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- with .maxRequestBody }}
- --gateway-max-request-body={{ . }}
{{- end }}
{{- range $name, $flag := dict "requestBody" "request-body" "clientSend" "client-send" "backendRead" "backend-read" "backendHead" "backend-head" }}
{{- with index ($.timeouts | default dict) $name }}
- --gateway-{{ $flag }}-timeout={{ . }}
{{- end }}
{{- end }}
{{- with .nodeSelector }}
{{- $pairs := list }}
{{- range $key, $value := . }}
{{- $pairs = append $pairs (printf "%s=%s" $key $value) }}
{{- end }}
- --gateway-node-selector={{ join "," $pairs }}
{{- end }}
{{- with .tolerations }}
- {{ printf "--gateway-tolerations=%s" (toJson .) | quote }}
{{- end }}
{{- end -}}
