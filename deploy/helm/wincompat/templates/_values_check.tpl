{{- /*
fail, also under helm lint: Helm's fail only logs there, and the include of a template that does not
exist, named by the message, is what fails the lint with the message in its error.
*/ -}}
{{- define "wincompat.failAlways" -}}
{{- fail . -}}
{{- include . nil -}}
{{- end -}}

{{- /*
unknownKeys is the message about the first key of .value (at .path) that .keys, a subtree of
wincompat.valueKeys, does not name; empty when there is none. Maps are ranged in the order of their
keys, so the same values always name the same key.
*/ -}}
{{- define "wincompat.unknownKeys" -}}
{{- $keys := .keys -}}
{{- $path := .path -}}
{{- $problem := "" -}}
{{- if and (kindIs "map" .value) (kindIs "map" $keys) -}}
{{- range $name, $v := .value -}}
{{- if not $problem -}}
{{- $at := $name -}}
{{- if $path }}{{ $at = printf "%s.%s" $path $name }}{{ end -}}
{{- if hasKey $keys $name -}}
{{- with get $keys $name -}}
{{- $problem = include "wincompat.unknownKeys" (dict "value" $v "keys" . "path" $at) -}}
{{- end -}}
{{- else -}}
{{- $problem = include "wincompat.unknownKey" (dict "name" $name "path" $path "keys" (keys $keys | sortAlpha)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- else if and (kindIs "slice" .value) (kindIs "slice" $keys) -}}
{{- $item := first $keys -}}
{{- range $i, $v := .value -}}
{{- if not $problem -}}
{{- $problem = include "wincompat.unknownKeys" (dict "value" $v "keys" $item "path" (printf "%s[%d]" $path $i)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $problem -}}
{{- end -}}

{{- /*
The message about an unknown key: the known key closest to it (case aside) when it is close enough to
be a slip, else the keys allowed there. A key is shown at most 64 bytes long, quoted unless plain.
*/ -}}
{{- define "wincompat.unknownKey" -}}
{{- $name := .name | toString | trunc 64 -}}
{{- $prefix := "" -}}
{{- if .path }}{{ $prefix = printf "%s." .path }}{{ end -}}
{{- $shown := printf "%s%s" $prefix $name -}}
{{- if not (regexMatch "^[-A-Za-z0-9_./\\[\\]]*$" $shown) }}{{ $shown = printf "%q" $shown }}{{ end -}}
{{- $best := "" -}}
{{- $bestDistance := 1000 -}}
{{- range .keys -}}
{{- $d := include "wincompat.distance" (dict "a" (lower $name) "b" (lower .)) | atoi -}}
{{- if lt $d $bestDistance }}{{ $best = . }}{{ $bestDistance = $d }}{{ end -}}
{{- end -}}
{{- if and $best (or (le $bestDistance 2) (le (mul $bestDistance 3) (len $best))) -}}
unknown key {{ $shown }}: did you mean {{ $prefix }}{{ $best }}? (values.yaml documents every key)
{{- else -}}
unknown key {{ $shown }}: the keys {{ if .path }}of {{ .path }}{{ else }}at the top{{ end }} are {{ join ", " .keys }} (values.yaml documents each)
{{- end -}}
{{- end -}}

{{- /* The edit distance (Levenshtein) between .a and .b, by characters. */ -}}
{{- define "wincompat.distance" -}}
{{- $a := splitList "" .a -}}
{{- $b := splitList "" .b -}}
{{- $prev := until (len $b | add1 | int) -}}
{{- range $i, $ca := $a -}}
{{- $cur := list (add1 $i) -}}
{{- range $j, $cb := $b -}}
{{- $cost := 1 -}}
{{- if eq $ca $cb }}{{ $cost = 0 }}{{ end -}}
{{- $cur = append $cur (min (add1 (index $prev (add1 $j))) (add1 (last $cur)) (add (index $prev $j) $cost)) -}}
{{- end -}}
{{- $prev = $cur -}}
{{- end -}}
{{- last $prev -}}
{{- end -}}

{{- /*
No replica answers the webhooks while replicaCount is 0, and the API server then applies each webhook's
failurePolicy: Fail refuses what the webhook would have seen, in warn mode too (the webhook is called
all the same). Ignore admits it untouched; with the hybrid engine the API server's admission policies
still keep Windows pods valid. So 0 is allowed only where every webhook of pods and workloads ignores a
failure.
*/ -}}
{{- define "wincompat.replicasProblem" -}}
{{- $n := .Values.replicaCount -}}
{{- /* A number only: null leaves the Deployment's default of 1, and the schema speaks of the rest. */ -}}
{{- if and (or (kindIs "int" $n) (kindIs "int64" $n) (kindIs "float64" $n)) (eq (toString $n) "0") -}}
{{- if eq (include "wincompat.windowsFailurePolicy" .) "Fail" -}}
{{- $why := "the webhook engine's default" -}}
{{- if .Values.webhook.failurePolicy }}{{ $why = "webhook.failurePolicy" }}{{ end -}}
{{- printf "replicaCount 0 leaves no replica to answer the Windows webhooks, whose failurePolicy is Fail (%s): the API server would refuse every Windows pod and workload in opted-in namespaces, in warn mode too. Set replicaCount to 1 or more (2 keeps one through a drain); to run with no replica, set webhook.failurePolicy=Ignore (Windows pods are then admitted unchanged), or engine=hybrid without webhook.failurePolicy on Kubernetes 1.36 and later (the API server's admission policies keep Windows pods valid without wincompat)" $why -}}
{{- else if eq .Values.linuxByDefault.failurePolicy "Fail" -}}
replicaCount 0 leaves no replica to answer the Linux-by-default webhooks, whose failurePolicy is Fail (linuxByDefault.failurePolicy): the API server would refuse every pod and workload that chooses no operating system in namespaces labelled wincompat.io/default-os=linux (in every namespace with linuxByDefault.allNamespaces). Set replicaCount to 1 or more, or linuxByDefault.failurePolicy=Ignore
{{- end -}}
{{- end -}}
{{- end -}}

{{- /*
With its own catalog (policy.builds) the policy's defaultBuild must name one of its builds, as the policy
file's check does (a build number or name, case and surrounding spaces aside). With the default catalog
values.schema.json checks it.
*/ -}}
{{- define "wincompat.defaultBuildProblem" -}}
{{- $policy := .Values.policy | default dict -}}
{{- if and (kindIs "map" $policy) (kindIs "slice" (get $policy "builds")) -}}
{{- $want := get $policy "defaultBuild" | default "" | toString | trim -}}
{{- if $want -}}
{{- $names := list -}}
{{- range get $policy "builds" -}}
{{- if kindIs "map" . -}}
{{- $names = append $names (get . "build" | default "" | toString) -}}
{{- range (get . "names" | default list) }}{{ $names = append $names (toString .) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $found := false -}}
{{- range $names }}{{ if eq (lower .) (lower $want) }}{{ $found = true }}{{ end }}{{ end -}}
{{- if not $found -}}
{{- printf "policy.defaultBuild %q is not in the catalog of policy.builds: use one of %s" ($want | trunc 64) (join ", " $names) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
