{{- /*
The webhooks' matchConditions, generated from the tables in policy by policy/admissionpolicy
(webhookconditions.go): do not edit, run UPDATE_GOLDEN=1 go test ./policy/admissionpolicy.
deploy/webhook carries the same expressions. policy-configmap takes the ConfigMap's name.
*/ -}}
{{- define "wincompat.matchCondition.windows-pod" -}}
has(object.spec.os) ? object.spec.os.name == 'windows' : object.spec.?nodeSelector[?'kubernetes.io/os'].orValue('') == 'windows' || object.spec.?nodeSelector[?'beta.kubernetes.io/os'].orValue('') == 'windows' || object.spec.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]).exists(t, t.?matchExpressions.orValue([]).exists(e, e.key == 'kubernetes.io/os' || e.key == 'beta.kubernetes.io/os'))
{{- end -}}
{{- define "wincompat.matchCondition.not-linux-pod" -}}
has(object.spec.os) ? object.spec.os.name == 'windows' : object.spec.?nodeSelector[?'kubernetes.io/os'].orValue('') != 'linux' && object.spec.?nodeSelector[?'beta.kubernetes.io/os'].orValue('') != 'linux'
{{- end -}}
{{- define "wincompat.matchCondition.windows-template" -}}
[object.kind == 'CronJob' ? object.spec.?jobTemplate.?spec.?template.?spec : object.kind == 'PodTemplate' ? object.?template.?spec : object.spec.?template.?spec].exists(o, o.hasValue() && (has(o.value().os) ? o.value().os.name == 'windows' : o.value().?nodeSelector[?'kubernetes.io/os'].orValue('') == 'windows' || o.value().?nodeSelector[?'beta.kubernetes.io/os'].orValue('') == 'windows' || o.value().?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]).exists(t, t.?matchExpressions.orValue([]).exists(e, e.key == 'kubernetes.io/os' || e.key == 'beta.kubernetes.io/os'))))
{{- end -}}
{{- define "wincompat.matchCondition.not-linux-template" -}}
[object.kind == 'CronJob' ? object.spec.?jobTemplate.?spec.?template.?spec : object.kind == 'PodTemplate' ? object.?template.?spec : object.spec.?template.?spec].exists(o, o.hasValue() && (has(o.value().os) ? o.value().os.name == 'windows' : o.value().?nodeSelector[?'kubernetes.io/os'].orValue('') != 'linux' && o.value().?nodeSelector[?'beta.kubernetes.io/os'].orValue('') != 'linux'))
{{- end -}}
{{- define "wincompat.matchCondition.unpinned-pod" -}}
!has(object.spec.os) && !has(object.spec.nodeName) && !object.spec.?nodeSelector[?'kubernetes.io/os'].hasValue() && !object.spec.?nodeSelector[?'beta.kubernetes.io/os'].hasValue() && !object.spec.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]).exists(t, t.?matchExpressions.orValue([]).exists(e, e.key == 'kubernetes.io/os' || e.key == 'beta.kubernetes.io/os')) && !object.metadata.?ownerReferences.orValue([]).exists(r, r.kind == 'DaemonSet' && r.?controller.orValue(false))
{{- end -}}
{{- define "wincompat.matchCondition.unpinned-template" -}}
[object.kind == 'CronJob' ? object.spec.?jobTemplate.?spec.?template.?spec : object.kind == 'PodTemplate' ? object.?template.?spec : object.spec.?template.?spec].exists(o, o.hasValue() && !has(o.value().os) && !o.value().?nodeSelector[?'kubernetes.io/os'].hasValue() && !o.value().?nodeSelector[?'beta.kubernetes.io/os'].hasValue() && !o.value().?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]).exists(t, t.?matchExpressions.orValue([]).exists(e, e.key == 'kubernetes.io/os' || e.key == 'beta.kubernetes.io/os')))
{{- end -}}
{{- define "wincompat.matchCondition.policy-configmap" -}}
object.metadata.name == '{{ . }}'
{{- end -}}
