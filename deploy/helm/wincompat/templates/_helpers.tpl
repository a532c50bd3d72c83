{{- define "wincompat.name" -}}wincompat{{- end -}}

{{- define "wincompat.fullname" -}}
{{- if contains "wincompat" .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-wincompat" .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "wincompat.labels" -}}
app.kubernetes.io/name: wincompat
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "wincompat.selectorLabels" -}}
app.kubernetes.io/name: wincompat
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "wincompat.servingCertName" -}}{{ include "wincompat.fullname" . }}-serving{{- end -}}
