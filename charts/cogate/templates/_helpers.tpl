{{/* Chart name. */}}
{{- define "cogate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Resource name prefix. */}}
{{- define "cogate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "cogate.webhookName" -}}{{ include "cogate.fullname" . | trunc 55 | trimSuffix "-" }}-webhook{{- end -}}
{{- define "cogate.controllerName" -}}{{ include "cogate.fullname" . | trunc 52 | trimSuffix "-" }}-controller{{- end -}}
{{- define "cogate.certSecretName" -}}{{ default (printf "%s-cert" (include "cogate.webhookName" .)) .Values.webhook.certs.secretName }}{{- end -}}
{{/* The webhook entry name; equal to cogate.webhook.config.WEBHOOK_NAME. */}}
{{- define "cogate.webhookEntryName" -}}pod-group-gate.scheduling.x-k8s.io{{- end -}}
{{- define "cogate.lateWebhookEntryName" -}}late-pod-group-gate.scheduling.x-k8s.io{{- end -}}

{{- define "cogate.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- define "cogate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "cogate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels; call with (dict "ctx" $ "component" "webhook"). */}}
{{- define "cogate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cogate.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* controller.validateReleases as a --validate-releases mode (true/false, the values of chart 0.1, mean always/never). */}}
{{- define "cogate.validateReleases" -}}
{{- $v := toString .Values.controller.validateReleases -}}
{{- if eq $v "true" -}}always{{- else if eq $v "false" -}}never{{- else -}}{{ $v }}{{- end -}}
{{- end -}}

{{/* PriorityClass of a component's pods: its priorityClassName value, else the chart's (priorityClass.create), else none. Call with (dict "ctx" $ "name" .Values.webhook.priorityClassName). */}}
{{- define "cogate.podPriorityClass" -}}
{{- if .name -}}{{ .name }}{{- else if .ctx.Values.priorityClass.create -}}{{ include "cogate.priorityClassName" .ctx }}{{- end -}}
{{- end -}}
{{- define "cogate.priorityClassName" -}}{{ include "cogate.fullname" . | trunc 54 | trimSuffix "-" }}-critical{{- end -}}

{{/* topologySpreadConstraints: an entry without labelSelector selects the component's pods.
Call with (dict "ctx" $ "component" "webhook" "constraints" .Values.webhook.topologySpreadConstraints). */}}
{{- define "cogate.spread" -}}
{{- $out := list -}}
{{- range .constraints -}}
{{- $c := deepCopy . -}}
{{- if not (hasKey $c "labelSelector") -}}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "cogate.selectorLabels" (dict "ctx" $.ctx "component" $.component) | fromYaml)) -}}
{{- end -}}
{{- $out = append $out $c -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{- define "cogate.validate" -}}
{{- if and (eq .Release.Namespace "default") (not .Values.allowDefaultNamespace) -}}
{{- fail "cogate must not be installed into the namespace \"default\": cogate never gates (nor preempts) pods in its own namespace, so pods created in \"default\" (the README example's too) would never be gated. Install into a namespace of its own (--namespace cogate-system --create-namespace), or set allowDefaultNamespace=true to accept that \"default\" is exempt" -}}
{{- end -}}
{{- if gt (int64 .Values.priorityClass.value) 1000000000 -}}
{{- fail (printf "priorityClass.value must be at most 1000000000 (the highest user-defined priority; the API server refuses more), got %v" .Values.priorityClass.value) -}}
{{- end -}}
{{- range .Values.controller.protectedNamespaces -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" (toString .)) -}}
{{- fail (printf "controller.protectedNamespaces: %q is not a namespace name (RFC 1123 label)" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- if not (has (include "cogate.validateReleases" .) (list "auto" "always" "never")) -}}
{{- fail (printf "controller.validateReleases must be auto, always or never, got %q" (toString .Values.controller.validateReleases)) -}}
{{- end -}}
{{- if not (has .Values.controller.placement (list "pinned" "free")) -}}
{{- fail (printf "controller.placement must be pinned or free, got %q" .Values.controller.placement) -}}
{{- end -}}
{{- if not (has .Values.logFormat (list "json" "text")) -}}
{{- fail (printf "logFormat must be json or text, got %q" .Values.logFormat) -}}
{{- end -}}
{{- if not (has .Values.controller.uncheckedConstraints (list "release" "hold-devices" "hold")) -}}
{{- fail (printf "controller.uncheckedConstraints must be release, hold-devices or hold, got %q" .Values.controller.uncheckedConstraints) -}}
{{- end -}}
{{- if not (has .Values.webhook.certs.mode (list "bootstrap" "cert-manager")) -}}
{{- fail (printf "webhook.certs.mode must be bootstrap or cert-manager, got %q" .Values.webhook.certs.mode) -}}
{{- end -}}
{{- if or (lt (int .Values.webhook.timeoutSeconds) 1) (gt (int .Values.webhook.timeoutSeconds) 30) -}}
{{- fail "webhook.timeoutSeconds must be between 1 and 30" -}}
{{- end -}}
{{- if not (has .Values.webhook.lateLabels.failurePolicy (list "Ignore" "Fail")) -}}
{{- fail (printf "webhook.lateLabels.failurePolicy must be Ignore or Fail, got %q" (toString .Values.webhook.lateLabels.failurePolicy)) -}}
{{- end -}}
{{- if lt (int .Values.controller.workers) 1 -}}
{{- fail (printf "controller.workers must be a whole number of at least 1, got %v" .Values.controller.workers) -}}
{{- end -}}
{{- range .Values.webhook.adoptSchedulerNames -}}
{{- if eq (toString .) "default-scheduler" -}}
{{- fail "webhook.adoptSchedulerNames must not hold default-scheduler: it is the scheduler adopted pods are rewritten to" -}}
{{- end -}}
{{- if has (toString .) $.Values.controller.schedulerNames -}}
{{- fail (printf "webhook.adoptSchedulerNames and controller.schedulerNames both name %q: keep it in one (adopt: rewrite it to default-scheduler; schedulerNames: release to it as it is)" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- if and (gt (int .Values.controller.replicas) 1) (not .Values.controller.leaderElect) -}}
{{- fail "controller.replicas > 1 needs controller.leaderElect=true (two leaders would release against the same capacity)" -}}
{{- end -}}
{{- end -}}

{{/* Arguments of `cogate certs bootstrap` (init container and rotator sidecar). */}}
{{- define "cogate.certsArgs" -}}
- certs
- --log-level={{ .Values.logLevel }}
- --log-format={{ .Values.logFormat }}
- bootstrap
- --namespace=$(POD_NAMESPACE)
- --secret-name={{ include "cogate.certSecretName" . }}
- --service-name={{ include "cogate.webhookName" . }}
- --cert-dir=/certs
- --webhook-config-name={{ include "cogate.fullname" . }}
- --webhook-name={{ include "cogate.webhookEntryName" . }}
{{- if .Values.webhook.lateLabels.enabled }}
- --webhook-name={{ include "cogate.lateWebhookEntryName" . }}
{{- end }}
- --rotate-before-days={{ .Values.webhook.certs.rotateBeforeDays }}
- --cert-validity-days={{ .Values.webhook.certs.certValidityDays }}
- --ca-validity-days={{ .Values.webhook.certs.caValidityDays }}
{{- end -}}

{{- /*
The admission mode in effect: "webhook" or "policy" (admission.mode; "auto" is "policy" when the API
server serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, Kubernetes 1.36+; `helm template`
without a cluster decides from --api-versions). docs/semantics.md, "Admission".
*/ -}}
{{- define "cogate.admissionMode" -}}
{{- $mode := .Values.admission.mode | default "webhook" -}}
{{- if not (has $mode (list "webhook" "policy" "auto")) -}}
{{- fail (printf "admission.mode must be webhook, policy or auto, got %q" (toString $mode)) -}}
{{- end -}}
{{- if eq $mode "auto" -}}
{{- ternary "policy" "webhook" (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy") -}}
{{- else -}}
{{- $mode -}}
{{- end -}}
{{- end -}}

{{- /* A list of strings as a CEL list literal of single-quoted strings (names: no quote in them). */ -}}
{{- define "cogate.celStrings" -}}
[{{ range $i, $s := . }}{{ if $i }}, {{ end }}'{{ $s }}'{{ end }}]
{{- end -}}
