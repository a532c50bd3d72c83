{{- /*
What the cluster must serve for the objects this release renders, checked where Helm asked the API
server (wincompat.clusterKnown), so that an install fails here, saying what to do, instead of with Helm's
`no matches for kind "Certificate"`; offline `helm template` cannot know, and renders. One row per
prerequisite: the kind that must be served, whether the values need it, and what to do without it.
*/ -}}
{{- define "wincompat.checkPrerequisites" -}}
{{- if include "wincompat.clusterKnown" . -}}
{{- $version := .Capabilities.KubeVersion.Version -}}
{{- $problems := list -}}
{{- if semverCompare "<1.30.0-0" $version -}}
{{- $problems = append $problems (printf "Kubernetes %s: wincompat needs 1.30 or later, where webhook matchConditions and admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy are GA" $version) -}}
{{- else -}}
{{- $needs := list
  (dict "kind" "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" "needed" true
    "fix" "the chart's ValidatingAdmissionPolicy needs it (GA and served by default from Kubernetes 1.30): enable it in the API server")
  (dict "kind" "cert-manager.io/v1/Certificate" "needed" (eq .Values.tls.mode "cert-manager")
    "fix" "tls.mode cert-manager (the default) needs cert-manager: install it first (https://cert-manager.io/docs/installation/), or let wincompat issue and rotate its own certificate with --set tls.mode=self-managed")
  (dict "kind" "admissionregistration.k8s.io/v1/MutatingAdmissionPolicyBinding" "needed" (eq (include "wincompat.engine" .) "hybrid")
    "fix" (printf "engine hybrid needs MutatingAdmissionPolicy v1 (Kubernetes 1.36 and later; this cluster is %s): set engine=auto or engine=webhook" $version))
  (dict "kind" "monitoring.coreos.com/v1/ServiceMonitor" "needed" .Values.metrics.serviceMonitor.enabled
    "fix" "metrics.serviceMonitor.enabled needs the Prometheus operator's ServiceMonitor CRD: install it, or set metrics.serviceMonitor.enabled=false")
  (dict "kind" "monitoring.coreos.com/v1/PrometheusRule" "needed" .Values.metrics.prometheusRule.enabled
    "fix" "metrics.prometheusRule.enabled needs the Prometheus operator's PrometheusRule CRD: install it, or set metrics.prometheusRule.enabled=false")
-}}
{{- range $needs -}}
{{- if and .needed (not ($.Capabilities.APIVersions.Has .kind)) -}}
{{- $problems = append $problems (printf "%s is not served: %s" .kind .fix) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $problems -}}
{{- fail (printf "this cluster lacks what the release needs:\n  - %s" (join "\n  - " .)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
