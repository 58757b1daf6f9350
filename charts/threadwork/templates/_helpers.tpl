{{/* Chart name, truncated to the 63 characters a label value may have. */}}
{{- define "threadwork.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: the release name, prefixed to the chart name unless it already contains it. */}}
{{- define "threadwork.fullname" -}}
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

{{/* Name of one service's objects: <fullname>-<service>. Argument: (dict "root" $ "name" "gateway"). */}}
{{- define "threadwork.componentName" -}}
{{- printf "%s-%s" (include "threadwork.fullname" .root | trunc 50 | trimSuffix "-") .name -}}
{{- end -}}

{{- define "threadwork.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "threadwork.labels" -}}
helm.sh/chart: {{ include "threadwork.chart" . }}
{{ include "threadwork.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: threadwork
{{- end -}}

{{/* Labels that select every Threadwork pod of this release. */}}
{{- define "threadwork.selectorLabels" -}}
app.kubernetes.io/name: {{ include "threadwork.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of one service's objects. Argument: (dict "root" $ "name" "gateway"). */}}
{{- define "threadwork.componentLabels" -}}
{{ include "threadwork.labels" .root }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{/* Labels that select one service's pods. Argument: (dict "root" $ "name" "gateway"). */}}
{{- define "threadwork.componentSelectorLabels" -}}
{{ include "threadwork.selectorLabels" .root }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{/* The runner's own ServiceAccount, with the kubernetes sandbox provider (templates/sandbox.yaml). */}}
{{- define "threadwork.runnerServiceAccountName" -}}
{{- printf "%s-runner" (include "threadwork.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "threadwork.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "threadwork.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "threadwork.image" -}}
{{- $image := .Values.image -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The Secret a secret reference points at: its existingSecret, else secrets.name, else the full name. */}}
{{- define "threadwork.secretName" -}}
{{- $ref := index .root.Values.secrets .ref -}}
{{- $ref.existingSecret | default .root.Values.secrets.name | default (include "threadwork.fullname" .root) -}}
{{- end -}}

{{- define "threadwork.configMapName" -}}
{{- printf "%s-config" (include "threadwork.fullname" .) -}}
{{- end -}}

{{/* One env entry read from a Secret. Argument: (dict "root" $ "env" "NAME" "ref" "session" "key" "KEY" "optional" bool). */}}
{{- define "threadwork.secretEnv" -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ include "threadwork.secretName" (dict "root" .root "ref" .ref) }}
      key: {{ .key }}
      optional: {{ .optional }}
{{- end -}}

{{/*
MONGO_URL of one service: its own connection string (a MongoDB user with readWrite on its own
database only) from its own Secret, and no other service's; or, with mongodb.insecure, the one URL
without credentials. Argument: (dict "root" $ "name" "gateway").
*/}}
{{- define "threadwork.mongoUrlEnv" -}}
{{- $m := .root.Values.mongodb -}}
{{- $secret := index ($m.existingSecrets | default dict) .name | default "" -}}
{{- if $secret }}
- name: MONGO_URL
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $m.existingSecretKey }}
{{- else if $m.insecure }}
- name: MONGO_URL
  value: {{ required "mongodb.url: the connection string every service uses with mongodb.insecure=true" $m.url | quote }}
{{- else }}
{{- fail (printf "mongodb.existingSecrets.%s: name the Secret holding the %s service's MongoDB connection string, as a user whose only role is readWrite on %s_%s (charts/threadwork/README.md, \"MongoDB users\"); or set mongodb.insecure=true and mongodb.url, for a MongoDB without authentication (development only)" .name .name $m.dbPrefix .name) }}
{{- end }}
{{- end -}}

{{/*
The environment of one service's container, beyond the shared ConfigMap.
Argument: (dict "root" $ "name" "gateway" "svc" .Values.gateway).
*/}}
{{- define "threadwork.env" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
- name: OTEL_SERVICE_NAME
  value: {{ printf "threadwork-%s" .name | quote }}
{{- /* Each service is a NATS identity of its own, and is given only its own key. */ -}}
{{- if $v.nats.auth.insecure }}
- name: NATS_INSECURE
  value: "true"
{{- else }}
- name: NATS_NKEY_SEED
  valueFrom:
    secretKeyRef:
      name: {{ required "nats.auth.existingSecret: name the Secret holding each service's NATS key (or set nats.auth.insecure=true, for development only)" $v.nats.auth.existingSecret }}
      key: {{ .name }}
{{- end }}
{{- if $v.nats.allowPlaintext }}
- name: NATS_ALLOW_PLAINTEXT
  value: "true"
{{- end }}
{{- if $v.nats.tls.existingSecret }}
- name: NATS_TLS_CA
  value: /etc/threadwork/nats-tls/ca.crt
{{- if $v.nats.tls.clientCertificate }}
- name: NATS_TLS_CERT
  value: /etc/threadwork/nats-tls/tls.crt
- name: NATS_TLS_KEY
  value: /etc/threadwork/nats-tls/tls.key
{{- end }}
{{- end }}
{{- /* The runner never uses the database, so it is not told where it is. */ -}}
{{- if ne .name "runner" }}
{{- include "threadwork.mongoUrlEnv" . }}
{{- end }}
{{- if eq .name "gateway" }}
- name: PORT
  value: {{ .svc.port | quote }}
- name: HOST
  value: "0.0.0.0"
{{ include "threadwork.secretEnv" (dict "root" $root "env" "SESSION_SECRET" "ref" "session" "key" $v.secrets.session.key "optional" false) }}
{{- /* Webhook signatures are checked here before a delivery goes on NATS (and again by repohost). */}}
{{ include "threadwork.secretEnv" (dict "root" $root "env" "GITHUB_WEBHOOK_SECRET" "ref" "githubWebhook" "key" $v.secrets.githubWebhook.key "optional" true) }}
{{- with .svc.trustProxy }}
- name: TRUST_PROXY
  value: {{ . | quote }}
{{- end }}
{{- else }}
- name: HEALTH_PORT
  value: {{ $v.healthPort | quote }}
{{- end }}
{{- if eq .name "repohost" }}
- name: REPOHOST_LOCAL_DIR
  value: /var/lib/threadwork/repos
{{- with .svc.github.apiUrl }}
- name: GITHUB_API_URL
  value: {{ . | quote }}
{{- end }}
{{- with .svc.github.appSlug }}
- name: GITHUB_APP_SLUG
  value: {{ . | quote }}
{{- end }}
{{- $app := $v.secrets.githubApp }}
{{ include "threadwork.secretEnv" (dict "root" $root "env" "GITHUB_APP_ID" "ref" "githubApp" "key" $app.appIdKey "optional" true) }}
{{ include "threadwork.secretEnv" (dict "root" $root "env" "GITHUB_APP_PRIVATE_KEY" "ref" "githubApp" "key" $app.privateKeyKey "optional" true) }}
{{ include "threadwork.secretEnv" (dict "root" $root "env" "GITHUB_CLIENT_ID" "ref" "githubApp" "key" $app.clientIdKey "optional" true) }}
{{ include "threadwork.secretEnv" (dict "root" $root "env" "GITHUB_CLIENT_SECRET" "ref" "githubApp" "key" $app.clientSecretKey "optional" true) }}
{{ include "threadwork.secretEnv" (dict "root" $root "env" "GITHUB_WEBHOOK_SECRET" "ref" "githubWebhook" "key" $v.secrets.githubWebhook.key "optional" true) }}
{{- end }}
{{- /*
One list for the three that read it: a runner serving a harness runs does not list waits for a job
consumer that is never made, and a harness threads takes that no runner serves queues runs for good.
*/}}
{{- if has .name (list "threads" "runs" "runner") }}
- name: HARNESSES
  value: {{ join "," $v.harnesses | quote }}
{{- end }}
{{- /* Only the runs service reads or writes the run event streams. */ -}}
{{- if eq .name "runs" }}
- name: RUN_EVENT_SHARDS
  value: {{ include "threadwork.runEventShards" $root | quote }}
{{- end }}
{{- if or (eq .name "threads") (eq .name "runs") }}
- name: DEFAULT_HARNESS
  value: {{ $v.defaultHarness | quote }}
{{- range $key, $prefix := dict "codex" "CODEX" "claudeCode" "CLAUDE" }}
{{- $harness := index $v.harnessCatalog $key }}
{{- with $harness.model }}
- name: {{ $prefix }}_MODEL
  value: {{ . | quote }}
{{- end }}
{{- with $harness.models }}
- name: {{ $prefix }}_MODELS
  value: {{ join "," . | quote }}
{{- end }}
{{- with $harness.reasoningEffort }}
- name: {{ $prefix }}_REASONING_EFFORT
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- if eq .name "threads" }}
- name: MAX_LIVE_RUNS_PER_USER
  value: {{ $v.limits.maxLiveRunsPerUser | int | toString | quote }}
- name: THREADS_PER_MINUTE_PER_USER
  value: {{ $v.limits.threadsPerMinutePerUser | int | toString | quote }}
{{- end }}
{{- if eq .name "runner" }}
- name: SANDBOX_ROOT
  value: /var/lib/threadwork/sandboxes
# The pod's name: stable across restarts, so a restarted runner is recognised as the same one.
- name: RUNNER_ID
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: RUNNER_CONCURRENCY
  value: {{ .svc.concurrency | quote }}
- name: RUNNER_WARM_SANDBOXES
  value: {{ .svc.warmSandboxes | int | toString | quote }}
- name: SANDBOX_MIRROR_IDLE_MS
  value: {{ .svc.mirrorIdleMs | int64 | toString | quote }}
- name: SANDBOX_JAIL
  value: {{ .svc.jail | default "required" | quote }}
- name: SANDBOX_EGRESS
  value: {{ .svc.egress.mode | quote }}
- name: SANDBOX_EGRESS_ALLOW
  value: {{ join "," .svc.egress.allow | quote }}
- name: CODEX_SANDBOX_MODE
  value: {{ .svc.codexSandbox | quote }}
{{- $sb := .svc.sandbox }}
- name: SANDBOX_PROVIDER
  value: {{ $sb.provider | quote }}
{{- if eq $sb.provider "kubernetes" }}
{{- $k := $sb.kubernetes }}
{{- if not $k.image }}
{{- fail "runner.sandbox.kubernetes.image: required with runner.sandbox.provider=kubernetes (the sandbox pods' image)" }}
{{- end }}
{{- if eq $k.namespace $root.Release.Namespace }}
{{- fail "runner.sandbox.kubernetes.namespace: must not be the release's own namespace (the runner's Role there would reach Threadwork's own pods)" }}
{{- end }}
- name: SANDBOX_K8S_NAMESPACE
  value: {{ $k.namespace | quote }}
- name: SANDBOX_K8S_IMAGE
  value: {{ $k.image | quote }}
- name: SANDBOX_K8S_RESOURCES
  value: {{ $k.resources | toJson | quote }}
- name: SANDBOX_K8S_RUNTIME_CLASS
  value: {{ $k.runtimeClassName | default "" | quote }}
- name: SANDBOX_K8S_NODE_SELECTOR
  value: {{ $k.nodeSelector | default dict | toJson | quote }}
- name: SANDBOX_K8S_TOLERATIONS
  value: {{ $k.tolerations | default list | toJson | quote }}
- name: SANDBOX_K8S_VOLUME_SIZE
  value: {{ $k.volume.size | quote }}
- name: SANDBOX_K8S_STORAGE_CLASS
  value: {{ $k.volume.storageClassName | default "" | quote }}
- name: SANDBOX_K8S_TMP_SIZE
  value: {{ $k.tmpSize | quote }}
- name: SANDBOX_K8S_IDLE_MS
  value: {{ $k.idleTimeoutMs | int | toString | quote }}
{{- end }}
{{- with .svc.modelBaseUrl }}
- name: MODEL_BASE_URL
  value: {{ . | quote }}
{{- end }}
{{ include "threadwork.secretEnv" (dict "root" $root "env" "MODEL_API_KEY" "ref" "model" "key" $v.secrets.model.key "optional" true) }}
{{- with .svc.claudeBaseUrl }}
- name: CLAUDE_BASE_URL
  value: {{ . | quote }}
{{- end }}
{{ include "threadwork.secretEnv" (dict "root" $root "env" "CLAUDE_API_KEY" "ref" "claudeModel" "key" $v.secrets.claudeModel.key "optional" true) }}
{{- end }}
{{- range $name, $value := .svc.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/*
The pod template shared by every service.
Argument: (dict "root" $ "name" "gateway" "svc" .Values.gateway "volumes" list-of-extra-mounts).
*/}}
{{- define "threadwork.podTemplate" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $isGateway := eq .name "gateway" -}}
{{- /* What bubblewrap needs of the runner pod to make a jail (runner.jailPod). */ -}}
{{- /* With the kubernetes provider the agents run in pods of their own, not in a jail in this one. */ -}}
{{- $k8sSandboxes := and (eq .name "runner") (eq (dig "sandbox" "provider" "local" .svc) "kubernetes") -}}
{{- $jailPod := and (eq .name "runner") (ne (.svc.jail | default "required") "off") (not $k8sSandboxes) -}}
{{- $containerSecurity := deepCopy $v.containerSecurityContext -}}
{{- if $jailPod -}}
{{- $jp := .svc.jailPod -}}
{{- if $jp.unmaskedProc -}}{{- $_ := set $containerSecurity "procMount" "Unmasked" -}}{{- end -}}
{{- with $jp.seccompProfile -}}{{- $_ := set $containerSecurity "seccompProfile" . -}}{{- end -}}
{{- with $jp.appArmorProfile -}}{{- $_ := set $containerSecurity "appArmorProfile" . -}}{{- end -}}
{{- end -}}
{{- $probePort := ternary "http" "health" $isGateway -}}
metadata:
  labels:
    {{- include "threadwork.componentLabels" (dict "root" $root "name" .name) | nindent 4 }}
  annotations:
    checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
    {{- with .svc.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- if $k8sSandboxes }}
  # The runner with the kubernetes provider: its own ServiceAccount, bound to a Role in the sandbox
  # namespace only (templates/sandbox.yaml); no other pod gets a token.
  serviceAccountName: {{ include "threadwork.runnerServiceAccountName" $root }}
  automountServiceAccountToken: true
  {{- else }}
  serviceAccountName: {{ include "threadwork.serviceAccountName" $root }}
  # No service talks to the Kubernetes API (the runner does only with the kubernetes provider).
  automountServiceAccountToken: false
  {{- end }}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $v.podSecurityContext | nindent 4 }}
  {{- if and $jailPod .svc.jailPod.userNamespace }}
  # A user namespace of the pod's own: root in it is nobody on the node.
  hostUsers: false
  {{- end }}
  {{- with .svc.runtimeClassName }}
  runtimeClassName: {{ . | quote }}
  {{- end }}
  terminationGracePeriodSeconds: {{ .svc.terminationGracePeriodSeconds }}
  containers:
    - name: {{ .name }}
      image: {{ include "threadwork.image" $root | quote }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      args: [{{ printf "services/%s/dist/main.js" .name | quote }}]
      ports:
        {{- if $isGateway }}
        - name: http
          containerPort: {{ .svc.port }}
          protocol: TCP
        {{- else }}
        - name: health
          containerPort: {{ $v.healthPort }}
          protocol: TCP
        {{- end }}
      envFrom:
        - configMapRef:
            name: {{ include "threadwork.configMapName" $root }}
      env:
        # Libraries that write under $HOME get the writable /tmp.
        - name: HOME
          value: /tmp
        {{- include "threadwork.env" . | nindent 8 }}
      startupProbe:
        httpGet:
          path: /healthz
          port: {{ $probePort }}
        {{- toYaml $v.probes.startup | nindent 8 }}
      livenessProbe:
        httpGet:
          path: /healthz
          port: {{ $probePort }}
        {{- toYaml $v.probes.liveness | nindent 8 }}
      readinessProbe:
        httpGet:
          path: /readyz
          port: {{ $probePort }}
        {{- toYaml $v.probes.readiness | nindent 8 }}
      resources:
        {{- toYaml .svc.resources | nindent 8 }}
      securityContext:
        {{- toYaml $containerSecurity | nindent 8 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- if eq .name "repohost" }}
        - name: repos
          mountPath: /var/lib/threadwork/repos
        {{- end }}
        {{- if eq .name "runner" }}
        - name: workspaces
          mountPath: /var/lib/threadwork/sandboxes
        {{- end }}
        {{- if $v.nats.tls.existingSecret }}
        - name: nats-tls
          mountPath: /etc/threadwork/nats-tls
          readOnly: true
        {{- end }}
  volumes:
    - name: tmp
      emptyDir:
        sizeLimit: {{ .svc.tmpSizeLimit | default $v.tmpSizeLimit }}
    {{- with $v.nats.tls.existingSecret }}
    - name: nats-tls
      secret:
        secretName: {{ . }}
    {{- end }}
    {{- if eq .name "repohost" }}
    # The `local` provider's folder: empty here, since on Kubernetes repositories come from the
    # GitHub App (the runner could not clone from another pod's disk).
    - name: repos
      emptyDir:
        sizeLimit: 1Gi
    {{- end }}
  {{- if $v.topologySpread.enabled }}
  topologySpreadConstraints:
    {{- range $v.topologySpread.topologyKeys }}
    - maxSkew: {{ $v.topologySpread.maxSkew }}
      topologyKey: {{ . }}
      whenUnsatisfiable: {{ $v.topologySpread.whenUnsatisfiable }}
      labelSelector:
        matchLabels:
          {{- include "threadwork.componentSelectorLabels" (dict "root" $root "name" $.name) | nindent 10 }}
    {{- end }}
  {{- end }}
  {{- with .svc.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .svc.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .svc.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* The services run as Deployments; the runner is a StatefulSet (templates/runner.yaml). */}}
{{- define "threadwork.deployments" -}}
{{- list "gateway" "threads" "runs" "repohost" "review" | toJson -}}
{{- end -}}

{{/*
The runner's egress peers (networkPolicy.egress.runner.to), with the cluster's own addresses
(networkPolicy.clusterCIDRs) excepted from every ipBlock of the whole address space: 0.0.0.0/0 gets
the IPv4 ranges, ::/0 the IPv6 ones (an except must lie inside its cidr). An empty `to` would let
the runner, and so the agents, reach everything: refused.
*/}}
{{- define "threadwork.runnerEgressPeers" -}}
{{- $np := .Values.networkPolicy -}}
{{- $rule := $np.egress.runner -}}
{{- if not $rule.to -}}
{{- fail "networkPolicy.egress.runner.to: empty allows the runner (and the agents it connects for) every destination, the cluster's own included; give ipBlocks (0.0.0.0/0 gets networkPolicy.clusterCIDRs excepted) or other peers" -}}
{{- end -}}
{{- $v4 := list -}}
{{- $v6 := list -}}
{{- range $np.clusterCIDRs -}}
{{- if contains ":" . -}}{{- $v6 = append $v6 . -}}{{- else -}}{{- $v4 = append $v4 . -}}{{- end -}}
{{- end -}}
{{- $peers := list -}}
{{- range $rule.to -}}
{{- $peer := deepCopy . -}}
{{- with $peer.ipBlock -}}
{{- $cluster := ternary $v6 $v4 (eq .cidr "::/0") -}}
{{- if or (eq .cidr "0.0.0.0/0") (eq .cidr "::/0") -}}
{{- if not $cluster -}}
{{- fail (printf "networkPolicy.clusterCIDRs: name the cluster's %s pod and service ranges, which the runner's egress to %s must except" (ternary "IPv6" "IPv4" (eq .cidr "::/0")) .cidr) -}}
{{- end -}}
{{- $_ := set . "except" (concat (.except | default list) $cluster | uniq) -}}
{{- end -}}
{{- end -}}
{{- $peers = append $peers $peer -}}
{{- end -}}
{{- toYaml $peers -}}
{{- end -}}

{{/*
A byte quantity (values.schema.json byteQuantity, or the canonical form the API server stores it
in) as a number of bytes, so that 1Gi and 1024Mi compare equal.
*/}}
{{- define "threadwork.bytes" -}}
{{- $q := toString . -}}
{{- $digits := regexFind "^[0-9]+" $q -}}
{{- $suffix := trimPrefix $digits $q -}}
{{- $factors := dict "" "1" "k" "1000" "M" "1000000" "G" "1000000000" "T" "1000000000000" "P" "1000000000000000" "E" "1000000000000000000" "Ki" "1024" "Mi" "1048576" "Gi" "1073741824" "Ti" "1099511627776" "Pi" "1125899906842624" "Ei" "1152921504606846976" -}}
{{- if or (not $digits) (not (hasKey $factors $suffix)) -}}
{{- fail (printf "%q is not a whole number of bytes (e.g. 20Gi)" $q) -}}
{{- end -}}
{{- mul (atoi $digits) (atoi (get $factors $suffix)) -}}
{{- end -}}

{{/*
RUN_EVENT_SHARDS, checked against the release in place: the count is fixed at install (a run's log
is in the stream its id hashes to), so an upgrade that changes it is refused before anything is
applied rather than leave the runs pods refusing to start half-way through a rollout. A runs
Deployment without the variable is of a chart from before it, whose log is the one stream
RUN_EVENTS. (lookup sees nothing under `helm template` and dry runs, which skip the check.)
*/}}
{{- define "threadwork.runEventShards" -}}
{{- $want := int (.Values.nats.runEventShards | default 1) -}}
{{- $live := lookup "apps/v1" "Deployment" .Release.Namespace (include "threadwork.componentName" (dict "root" . "name" "runs")) -}}
{{- if $live -}}
{{- $had := 1 -}}
{{- range $live.spec.template.spec.containers -}}
{{- range (.env | default list) -}}
{{- if eq .name "RUN_EVENT_SHARDS" -}}{{- $had = int .value -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- if ne $had $want -}}
{{- fail (printf "nats.runEventShards cannot change from %d to %d: each run's event log stays in the stream its id was hashed to among %d, and the runs service refuses to start with another count. Upgrade with --set nats.runEventShards=%d." $had $want $had $had) -}}
{{- end -}}
{{- end -}}
{{- $want -}}
{{- end -}}
