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

{{- /*
The name of the release's Mutating- and ValidatingWebhookConfiguration. The API server calls mutating
webhook configurations in the order of their names; the prefix puts wincompat's before platform webhooks
that act on Windows pods only when the nodeSelector already pins Windows (EKS's
vpc-resource-mutating-webhook). See deploy/webhook/README.md, "Order among webhooks".
*/ -}}
{{- define "wincompat.webhookConfigName" -}}{{ printf "0100-%s" (include "wincompat.fullname" .) }}{{- end -}}

{{- define "wincompat.servingCertName" -}}{{ include "wincompat.fullname" . }}-serving{{- end -}}

{{- /*
imageResolver.timeout, as given, after checking it: the API server gives the whole review
webhook.timeoutSeconds, so wincompat must stop waiting for registries and fall back before that.
*/ -}}
{{- define "wincompat.imageLookupTimeout" -}}
{{- $t := toString .Values.imageResolver.timeout -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?(ms|s)$" $t) -}}
{{- fail (printf "imageResolver.timeout %q: use seconds or milliseconds, such as 1s or 1500ms" $t) -}}
{{- end -}}
{{- $ms := 0.0 -}}
{{- if hasSuffix "ms" $t -}}
{{- $ms = float64 (trimSuffix "ms" $t) -}}
{{- else -}}
{{- $ms = mulf (float64 (trimSuffix "s" $t)) 1000 -}}
{{- end -}}
{{- $webhookMs := mulf (float64 .Values.webhook.timeoutSeconds) 1000 -}}
{{- if ge $ms $webhookMs -}}
{{- fail (printf "imageResolver.timeout %s is not under webhook.timeoutSeconds (%v): the API server would give up on the review (with failurePolicy Fail, reject the pod) before wincompat stops waiting for registries and falls back. Lower imageResolver.timeout (default 1s) or raise webhook.timeoutSeconds" $t .Values.webhook.timeoutSeconds) -}}
{{- end -}}
{{- if or (le $ms 0.0) (gt $ms 2000.0) -}}
{{- fail (printf "imageResolver.timeout %s: use more than 0 and at most 2s (wincompat serve refuses longer waits)" $t) -}}
{{- end -}}
{{- $t -}}
{{- end -}}

{{- /* imageResolver.gateTimeout, checked: a duration of whole hours, minutes and seconds, at least 30s, so
that a slow registry gets its chance before the leader falls back. */ -}}
{{- define "wincompat.gateTimeout" -}}
{{- $t := toString .Values.imageResolver.gateTimeout -}}
{{- if not (regexMatch "^([0-9]+(h|m|s))+$" $t) -}}
{{- fail (printf "imageResolver.gateTimeout %q: use a duration such as 3m, 90s or 1m30s" $t) -}}
{{- end -}}
{{- $seconds := 0 -}}
{{- range regexFindAll "[0-9]+[hms]" $t -1 -}}
{{- $n := atoi (trimSuffix "h" (trimSuffix "m" (trimSuffix "s" .))) -}}
{{- $seconds = add $seconds (mul $n (get (dict "h" 3600 "m" 60 "s" 1) (substr (sub (len .) 1 | int) (len .) .))) -}}
{{- end -}}
{{- if lt (int $seconds) 30 -}}
{{- fail (printf "imageResolver.gateTimeout %s: use at least 30s, so that a slow registry can answer before the leader removes the gate with the fallback build" $t) -}}
{{- end -}}
{{- $t -}}
{{- end -}}

{{- /* imageResolver.mode, checked: "true" when Windows pods may wait behind the scheduling gate (lookup and
gate), "" with fallback. */ -}}
{{- define "wincompat.gating" -}}
{{- $mode := toString .Values.imageResolver.mode -}}
{{- if not (has $mode (list "lookup" "gate" "fallback")) -}}
{{- fail (printf "imageResolver.mode %q: use lookup, gate or fallback" $mode) -}}
{{- end -}}
{{- if ne $mode "fallback" }}true{{ end -}}
{{- end -}}

{{- /* Whether wincompat reads the pods' own imagePullSecrets: RBAC and the policy follow this one switch. */ -}}
{{- define "wincompat.podPullSecrets" -}}
{{- if and .Values.imageResolver.enabled .Values.imageResolver.podPullSecrets -}}
{{- if not .Values.webhook.clientAuth.caConfigMap -}}
{{- fail "imageResolver.podPullSecrets needs webhook.clientAuth.caConfigMap: without the API server's client certificate any caller of the webhook port names the namespace whose pull secrets wincompat reads" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{- /*
Whether Helm asked the API server what it serves: `helm install`, `upgrade`, `--dry-run=server` and
`helm template --validate` list every served kind as group/version/Kind, while offline `helm template`
knows only group/versions (of its own client library, plus --api-versions), never a kind. So a served
kind missing from .Capabilities.APIVersions means the cluster lacks it only when this is true.
*/ -}}
{{- define "wincompat.clusterKnown" -}}
{{- if .Capabilities.APIVersions.Has "v1/Namespace" -}}true{{- end -}}
{{- end -}}

{{- /*
The engine: hybrid where the API server serves MutatingAdmissionPolicy v1 (Kubernetes 1.36 and later)
when engine is auto, else what engine says.
*/ -}}
{{- define "wincompat.engine" -}}
{{- if eq .Values.engine "auto" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" -}}hybrid{{- else -}}webhook{{- end -}}
{{- else if or (eq .Values.engine "webhook") (eq .Values.engine "hybrid") -}}
{{- .Values.engine -}}
{{- else -}}
{{- fail (printf "engine %q: use auto, webhook or hybrid" .Values.engine) -}}
{{- end -}}
{{- end -}}

{{- /*
Why the engine is what it is, for the Deployment's annotation, the comment above it and NOTES.txt. Offline
rendering cannot see the MutatingAdmissionPolicy API, so auto renders the webhook engine there.
*/ -}}
{{- define "wincompat.engineReason" -}}
{{- $api := "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" -}}
{{- if ne .Values.engine "auto" -}}
the values set engine: {{ .Values.engine }}
{{- else if and (.Capabilities.APIVersions.Has $api) (include "wincompat.clusterKnown" .) -}}
engine is auto and the API server serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy
{{- else if .Capabilities.APIVersions.Has $api -}}
engine is auto and --api-versions names {{ $api }}
{{- else if include "wincompat.clusterKnown" . -}}
engine is auto and the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (Kubernetes 1.36 and later)
{{- else -}}
engine is auto and offline rendering (helm template) cannot see whether the cluster serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy: for hybrid on Kubernetes 1.36 and later, pass --api-versions {{ $api }} or set engine: hybrid
{{- end -}}
{{- end -}}

{{- /*
The Windows webhooks' failurePolicy: webhook.failurePolicy when set, else Fail with the webhook engine
(nothing else validates a Windows pod) and Ignore with hybrid (the admission policies do).
*/ -}}
{{- define "wincompat.windowsFailurePolicy" -}}
{{- if .Values.webhook.failurePolicy -}}{{ .Values.webhook.failurePolicy }}{{- else if eq (include "wincompat.engine" .) "hybrid" -}}Ignore{{- else -}}Fail{{- end -}}
{{- end -}}

{{- /*
The image: image.repository with, when an umbrella chart sets global.imageRegistry, that registry in
place of the repository's own (its first part, when that names a host as a Docker reference's does:
a dot, a port or localhost), as Bitnami-style charts read that value.
*/ -}}
{{- define "wincompat.image" -}}
{{- $repository := .Values.image.repository -}}
{{- $registry := "" -}}
{{- if kindIs "map" .Values.global }}{{ $registry = get .Values.global "imageRegistry" | default "" | toString | trimSuffix "/" }}{{ end -}}
{{- if $registry -}}
{{- $parts := splitList "/" $repository -}}
{{- $first := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $repository = join "/" (rest $parts) -}}
{{- end -}}
{{- $repository = printf "%s/%s" $registry $repository -}}
{{- end -}}
{{- printf "%s:%v" $repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- /*
The pods' imagePullSecrets, as YAML list items: image.pullSecrets, then global.imagePullSecrets (names,
or {name: ...} as Bitnami-style charts give them), each once.
*/ -}}
{{- define "wincompat.imagePullSecrets" -}}
{{- $names := .Values.image.pullSecrets | default list -}}
{{- if kindIs "map" .Values.global -}}
{{- range get .Values.global "imagePullSecrets" | default list -}}
{{- if kindIs "map" . }}{{ $names = append $names (get . "name") }}{{ else }}{{ $names = append $names . }}{{ end -}}
{{- end -}}
{{- end -}}
{{- range $names | uniq }}
- name: {{ . | toString | quote }}
{{- end -}}
{{- end -}}
