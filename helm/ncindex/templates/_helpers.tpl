{{/* Names, labels and the pieces every ncindex pod shares. */}}

{{- define "ncindex.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ncindex.fullname" -}}
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

{{- define "ncindex.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "ncindex.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* selector labels; call with (dict "root" $ "component" "receiver") */}}
{{- define "ncindex.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ncindex.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "ncindex.componentLabels" -}}
{{ include "ncindex.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "ncindex.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ncindex.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ncindex.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "ncindex.secretName" -}}
{{- default (include "ncindex.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* The in-cluster Redis's URL (the bitnami chart's master Service), its password, when
auth is enabled, expanded by Kubernetes from REDIS_PASSWORD (ncindex.env). */}}
{{- define "ncindex.inClusterRedisUrl" -}}
{{- $auth := "" -}}
{{- if .Values.redis.auth.enabled }}{{ $auth = ":$(REDIS_PASSWORD)@" }}{{ end -}}
{{- printf "redis://%s%s-redis-master:6379/0" $auth .Release.Name -}}
{{- end -}}

{{/* Redis URL for the ConfigMap, empty when it holds a password (ncindex.env sets it then);
fails when no Redis is configured. */}}
{{- define "ncindex.redisUrl" -}}
{{- if .Values.redis.enabled -}}
{{- if not .Values.redis.auth.enabled }}{{ include "ncindex.inClusterRedisUrl" . }}{{ end -}}
{{- else if and .Values.externalRedis.url .Values.externalRedis.existingSecret -}}
{{- fail "externalRedis.url and externalRedis.existingSecret are both set: set one (the Secret holds the whole URL, password included, under externalRedis.existingSecretKey; with both, the URL won and the Secret was never read)" -}}
{{- else if .Values.externalRedis.url -}}
{{- .Values.externalRedis.url -}}
{{- else if not .Values.externalRedis.existingSecret -}}
{{- fail "no Redis: set redis.enabled, externalRedis.url or externalRedis.existingSecret" -}}
{{- end -}}
{{- end -}}

{{- define "ncindex.qdrantUrl" -}}
{{- if .Values.qdrant.enabled -}}
{{- printf "http://%s-qdrant:6333" .Release.Name -}}
{{- else if .Values.externalQdrant.url -}}
{{- .Values.externalQdrant.url -}}
{{- else -}}
{{- fail "no Qdrant: set qdrant.enabled or externalQdrant.url" -}}
{{- end -}}
{{- end -}}

{{/* Seconds a worker pod gets after SIGTERM; must exceed the task hard time limit. */}}
{{- define "ncindex.workerGrace" -}}
{{- $limit := int (default 300 .Values.config.task_time_limit) -}}
{{- $grace := int .Values.workers.terminationGracePeriodSeconds -}}
{{- if le $grace $limit -}}
{{- fail (printf "workers.terminationGracePeriodSeconds (%d) must exceed config.task_time_limit (%d)" $grace $limit) -}}
{{- end -}}
{{- $grace -}}
{{- end -}}

{{/* Every queue (ingest, index, evict, reconcile) must be consumed by a worker group: one that
none consumes fills up, and what it carries (webhook events, evictions, scans) never runs. */}}
{{- define "ncindex.workerQueuesCovered" -}}
{{- $consumed := list -}}
{{- range $group, $spec := .Values.workers.groups -}}
{{- $consumed = concat $consumed $spec.queues -}}
{{- end -}}
{{- range $queue := list "ingest" "index" "evict" "reconcile" -}}
{{- if not (has $queue $consumed) -}}
{{- fail (printf "workers.groups: no group consumes the %s queue" $queue) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A worker group's NCINDEX_WORKER_MAX_MEMORY_PER_CHILD (KiB: its maxMemoryPerChild, else
config.worker_max_memory_per_child, else the settings' 1200000) must be below the group's
memory limit: billiard compares it with a pool process's peak resident size, which stays under
the container's limit (the OOM killer ends the container first), so a bound at or above the
limit replaces no process (the default was, on the 1 GiB light group). Takes a dict of "root"
and "group" (the group's name). A limit this does not read (an exponent, milli) is not checked. */}}
{{- define "ncindex.workerMemoryBound" -}}
{{- $spec := get .root.Values.workers.groups .group -}}
{{- $from := printf "workers.groups.%s.maxMemoryPerChild" .group -}}
{{- $bound := $spec.maxMemoryPerChild -}}
{{- if not (hasKey $spec "maxMemoryPerChild") -}}
{{- $from = "config.worker_max_memory_per_child" -}}
{{- $bound = ternary .root.Values.config.worker_max_memory_per_child 1200000 (hasKey .root.Values.config "worker_max_memory_per_child") -}}
{{- end -}}
{{- $limit := dig "limits" "memory" "" (default dict $spec.resources) -}}
{{- $bytes := 0.0 -}}
{{- if kindIs "string" $limit -}}
{{- $number := regexFind "^[0-9]+([.][0-9]+)?" $limit -}}
{{- $units := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- $unit := trimPrefix $number $limit -}}
{{- if and $number (hasKey $units $unit) -}}
{{- $bytes = mulf (float64 $number) (get $units $unit) -}}
{{- end -}}
{{- else if $limit -}}
{{- $bytes = float64 $limit -}}
{{- end -}}
{{- if and (gt (int64 $bound) 0) (gt $bytes 0.0) (ge (mulf $bound 1024) $bytes) -}}
{{- fail (printf "%s (%d KiB) must be below workers.groups.%s.resources.limits.memory (%v): a pool process's peak never passes the container's limit, so none would be replaced (the OOM killer ends the container first); set %s below it, leaving room for its concurrency (%d)" $from (int64 $bound) .group $limit (printf "workers.groups.%s.maxMemoryPerChild" .group) (int64 $spec.concurrency)) -}}
{{- end -}}
{{- end -}}

{{/* Seconds after which a worker's heartbeat file counts as stale (its probes' --max-age);
must exceed the interval at which the worker touches it, or every probe fails. */}}
{{- define "ncindex.heartbeatMaxAge" -}}
{{- $interval := int .Values.workers.heartbeat.interval -}}
{{- $maxAge := int .Values.workers.heartbeat.maxAge -}}
{{- if le $maxAge $interval -}}
{{- fail (printf "workers.heartbeat.maxAge (%d) must exceed workers.heartbeat.interval (%d)" $maxAge $interval) -}}
{{- end -}}
{{- $maxAge -}}
{{- end -}}

{{/* Pod annotations: roll pods when settings or secrets change. */}}
{{- define "ncindex.podAnnotations" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* prometheus.io/* annotations for annotation-based scraping: (dict "root" $ "port" 8080) */}}
{{- define "ncindex.scrapeAnnotations" -}}
{{- if .root.Values.metrics.scrapeAnnotations -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end -}}
{{- end -}}

{{/* Environment of every ncindex container (settings come from the ConfigMap via envFrom). */}}
{{- define "ncindex.env" -}}
- name: NCINDEX_WEBHOOK_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "ncindex.secretName" . }}
      key: webhook-secret
- name: NCINDEX_WEBHOOK_PREVIOUS_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "ncindex.secretName" . }}
      key: webhook-previous-secret
      optional: true
- name: NCINDEX_ACCOUNTS_FILE
  value: /etc/ncindex/secrets/accounts.json
{{- if and .Values.redis.enabled .Values.redis.auth.enabled }}
{{- /* the bitnami chart's Secret: <release>-redis (its fullname), key redis-password, unless
       auth.existingSecret names another; $(REDIS_PASSWORD) below is expanded by Kubernetes */}}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.auth.existingSecret | default (printf "%s-redis" .Release.Name) }}
      key: {{ .Values.redis.auth.existingSecretPasswordKey | default "redis-password" }}
- name: NCINDEX_REDIS_URL
  value: {{ include "ncindex.inClusterRedisUrl" . | quote }}
{{- end }}
{{- if and (not .Values.redis.enabled) (not .Values.externalRedis.url) .Values.externalRedis.existingSecret }}
- name: NCINDEX_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.externalRedis.existingSecret }}
      key: {{ .Values.externalRedis.existingSecretKey }}
{{- end }}
{{- if and .Values.qdrant.enabled .Values.qdrant.apiKey }}
{{- /* the qdrant chart's Secret, <release>-qdrant-apikey (its fullname), key api-key, whatever
       form qdrant.apiKey takes (true, a string, valueFrom): qdrant/qdrant-helm
       charts/qdrant/templates/secret.yaml and _helpers.tpl "qdrant.secret" */}}
- name: NCINDEX_QDRANT_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ printf "%s-qdrant-apikey" .Release.Name }}
      key: api-key
{{- else if .Values.externalQdrant.existingSecret }}
- name: NCINDEX_QDRANT_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.externalQdrant.existingSecret }}
      key: {{ .Values.externalQdrant.existingSecretKey }}
{{- end }}
{{- end -}}

{{- define "ncindex.envFrom" -}}
- configMapRef:
    name: {{ include "ncindex.fullname" . }}
{{- end -}}

{{- define "ncindex.volumes" -}}
- name: secrets
  secret:
    secretName: {{ include "ncindex.secretName" . }}
    items:
      - key: accounts.json
        path: accounts.json
- name: tmp
  emptyDir: {}
{{- end -}}

{{- define "ncindex.volumeMounts" -}}
- name: secrets
  mountPath: /etc/ncindex/secrets
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* Pod-level settings shared by every Deployment. */}}
{{- define "ncindex.podSpecCommon" -}}
serviceAccountName: {{ include "ncindex.serviceAccountName" . }}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A gunicorn app (receiver, search or mcp): (dict "root" $ "component" "receiver" "module" "webhook_receiver.wsgi:app" "spec" .Values.receiver "startup" 6), plus "workerClass" for an ASGI app (gunicorn's --worker-class) */}}
{{- define "ncindex.gunicornDeployment" -}}
{{- $root := .root -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "ncindex.fullname" $root }}-{{ .component }}
  labels:
    {{- include "ncindex.componentLabels" . | nindent 4 }}
spec:
  {{- if not (and .spec.autoscaling .spec.autoscaling.enabled) }}
  replicas: {{ .spec.replicas }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "ncindex.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "ncindex.selectorLabels" . | nindent 8 }}
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        {{- include "ncindex.podAnnotations" $root | nindent 8 }}
        {{- include "ncindex.scrapeAnnotations" (dict "root" $root "port" 8080) | nindent 8 }}
    spec:
      {{- include "ncindex.podSpecCommon" $root | nindent 6 }}
      # Counted from the start of the preStop pause: the pause, gunicorn's graceful timeout,
      # then 25 s for its exit (90 s with the defaults, 5 + 60 + 25).
      terminationGracePeriodSeconds: {{ add (int $root.Values.gunicorn.preStopSeconds) (int $root.Values.gunicorn.timeout) 25 }}
      containers:
        - name: {{ .component }}
          image: {{ include "ncindex.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: ["gunicorn", "--config", "/etc/ncindex/gunicorn.conf.py",{{ with .workerClass }} "--worker-class", {{ . | quote }},{{ end }} "{{ .module }}"]
          # Keep serving while the endpoint is being removed from Services and Ingress; then
          # SIGTERM lets gunicorn finish its requests (graceful timeout = gunicorn.timeout).
          # preStop + graceful timeout fit in the grace period (their sum + 25 s).
          lifecycle:
            preStop:
              sleep:
                seconds: {{ $root.Values.gunicorn.preStopSeconds }}
          ports:
            - name: http
              containerPort: 8080
              protocol: TCP
          env:
            {{- include "ncindex.env" $root | nindent 12 }}
            - name: PORT
              value: "8080"
            - name: GUNICORN_WORKERS
              value: {{ $root.Values.gunicorn.workers | quote }}
            - name: GUNICORN_THREADS
              value: {{ $root.Values.gunicorn.threads | quote }}
            - name: GUNICORN_TIMEOUT
              value: {{ $root.Values.gunicorn.timeout | quote }}
            - name: PROMETHEUS_MULTIPROC_DIR
              value: /tmp/prometheus
          envFrom:
            {{- include "ncindex.envFrom" $root | nindent 12 }}
          startupProbe:
            httpGet: {path: /livez, port: http}
            periodSeconds: 5
            failureThreshold: {{ .startup }}
          livenessProbe:
            httpGet: {path: /livez, port: http}
            periodSeconds: 10
            timeoutSeconds: 5
            failureThreshold: 3
          readinessProbe:
            httpGet: {path: /readyz, port: http}
            periodSeconds: 10
            timeoutSeconds: 5
            failureThreshold: 2
          resources:
            {{- toYaml .spec.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            {{- include "ncindex.volumeMounts" $root | nindent 12 }}
      volumes:
        {{- include "ncindex.volumes" $root | nindent 8 }}
{{- end -}}

{{/* A PodDisruptionBudget: (dict "root" $ "component" "receiver" "pdb" .Values.receiver.pdb) */}}
{{- define "ncindex.pdb" -}}
{{- if .pdb.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "ncindex.fullname" .root }}-{{ .component }}
  labels:
    {{- include "ncindex.componentLabels" . | nindent 4 }}
spec:
  maxUnavailable: {{ .pdb.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "ncindex.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}

{{/* A CPU HorizontalPodAutoscaler: (dict "root" $ "component" "search" "hpa" .Values.search.autoscaling) */}}
{{- define "ncindex.hpa" -}}
{{- if .hpa.enabled }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "ncindex.fullname" .root }}-{{ .component }}
  labels:
    {{- include "ncindex.componentLabels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "ncindex.fullname" .root }}-{{ .component }}
  minReplicas: {{ .hpa.minReplicas }}
  maxReplicas: {{ .hpa.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ .hpa.targetCPUUtilizationPercentage }}
{{- end }}
{{- end -}}

{{/* The MCP server's DNS-rebinding allow-list (NCINDEX_MCP_ALLOWED_HOSTS) when config does not
set one: its Service's names in the cluster, the ingress host and config.public_url's host (the
operator's own proxy may serve /mcp there), each bare and with any port. */}}
{{- define "ncindex.mcpAllowedHosts" -}}
{{- $svc := printf "%s-mcp" (include "ncindex.fullname" .) -}}
{{- $names := list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) -}}
{{- if .Values.ingress.enabled }}{{ $names = append $names .Values.ingress.host }}{{ end -}}
{{- if .Values.config.public_url -}}
{{- /* its host without the port ([IPv6] kept whole) */ -}}
{{- $names = append $names (regexReplaceAll ":[0-9]*$" (lower (urlParse .Values.config.public_url).host) "") -}}
{{- end -}}
{{- $hosts := list -}}
{{- range uniq $names }}{{ $hosts = append (append $hosts .) (printf "%s:*" .) }}{{ end -}}
{{- toJson $hosts -}}
{{- end -}}

{{/* The MCP server's allowed origins (NCINDEX_MCP_ALLOWED_ORIGINS) when config does not set
them: the ingress's origin and config.public_url's (scheme://host[:port], the port dropped when
it is the scheme's default, as a browser's Origin omits it), as a JSON list; empty without
either (the settings' loopback defaults apply). */}}
{{- define "ncindex.mcpAllowedOrigins" -}}
{{- $origins := list -}}
{{- if .Values.ingress.enabled }}{{ $origins = append $origins (include "ncindex.ingressOrigin" .) }}{{ end -}}
{{- if .Values.config.public_url -}}
{{- $url := urlParse .Values.config.public_url -}}
{{- $origin := printf "%s://%s" (lower $url.scheme) (lower $url.host) -}}
{{- $origin = regexReplaceAll "^(https://.*):443$" $origin "${1}" -}}
{{- $origin = regexReplaceAll "^(http://.*):80$" $origin "${1}" -}}
{{- $origins = append $origins $origin -}}
{{- end -}}
{{- with uniq $origins }}{{ toJson . }}{{ end -}}
{{- end -}}

{{/*
The ingress's origin, scheme://ingress.host, the scheme https when ingress.tls covers
ingress.host (an entry listing it, or a wildcard "*.domain" matching it by one leftmost label as
TLS certificates do, RFC 6125 §6.4.3, or one listing no hosts, which Kubernetes' IngressTLS
applies to the controller's default host), else http: the origin a browser sends for a page
served through it (the MCP server's allowed origin), and the URL Nextcloud reaches the receiver
at (ncindex.publicUrl).
*/}}
{{- define "ncindex.ingressOrigin" -}}
{{- $scheme := "http" -}}
{{- $host := lower .Values.ingress.host -}}
{{- range .Values.ingress.tls -}}
{{- if not .hosts }}{{ $scheme = "https" }}{{ end -}}
{{- range .hosts -}}
{{- $name := lower . -}}
{{- if eq $name $host }}{{ $scheme = "https" }}{{ end -}}
{{- if and (hasPrefix "*." $name) (hasSuffix (trimPrefix "*" $name) $host) -}}
{{- $label := trimSuffix (trimPrefix "*" $name) $host -}}
{{- if and $label (not (contains "." $label)) }}{{ $scheme = "https" }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- printf "%s://%s" $scheme .Values.ingress.host -}}
{{- end -}}

{{/*
NCINDEX_PUBLIC_URL, the base URL Nextcloud delivers webhooks to (/hooks/nextcloud appended, as
the settings do): config.public_url when set, else the ingress's origin (ncindex.ingressOrigin);
without an ingress it must be set, or webhooks would be registered at an address nobody serves.
Trailing slashes are dropped, as Settings drops them.
*/}}
{{- define "ncindex.publicUrl" -}}
{{- if .Values.config.public_url -}}
{{- $url := urlParse .Values.config.public_url -}}
{{- $host := regexReplaceAll ":[0-9]*$" (lower $url.host) "" -}}
{{- if and .Values.ingress.enabled (eq $host (lower .Values.ingress.host)) (trimAll "/" $url.path) -}}
{{- fail (printf "config.public_url %s names ingress.host with the path %s, but the ingress routes /hooks at the root of %s: Nextcloud's deliveries to %s/hooks/nextcloud would reach no receiver. Drop the path, or leave config.public_url unset" .Values.config.public_url $url.path .Values.ingress.host (regexReplaceAll "/+$" .Values.config.public_url "")) -}}
{{- end -}}
{{- regexReplaceAll "/+$" .Values.config.public_url "" -}}
{{- else if .Values.ingress.enabled -}}
{{- include "ncindex.ingressOrigin" . -}}
{{- else -}}
{{- fail "config.public_url is required without ingress.enabled: the URL at which Nextcloud reaches this release's receiver (webhooks are delivered to <public_url>/hooks/nextcloud)" -}}
{{- end -}}
{{- end -}}


{{/*
The rules across settings that every pod checks at start (ncindex/settings.py, the model
validator Settings._load_accounts_file: "must be below" / "must exceed"), refused here so that values breaking
one fail at helm install/upgrade instead of crash-looping every new pod. A setting absent from
config takes the settings' default (tests/deploy/test_chart.py holds these defaults to
Settings'); the replication factor takes the chart's own (2 with the in-cluster Qdrant cluster,
NCINDEX_QDRANT_REPLICATION_FACTOR in configmap.yaml).
*/}}
{{- define "ncindex.settingsInOrder" -}}
{{- $c := .Values.config -}}
{{- $soft := int (dig "task_soft_time_limit" 240 $c) -}}
{{- $hard := int (dig "task_time_limit" 300 $c) -}}
{{- $visibility := int (dig "visibility_timeout" 900 $c) -}}
{{- $lock := int (dig "lock_ttl" 360 $c) -}}
{{- if ge $soft $hard -}}
{{- fail (printf "config.task_soft_time_limit (%d) must be below config.task_time_limit (%d)" $soft $hard) -}}
{{- end -}}
{{- if ge $hard $visibility -}}
{{- fail (printf "config.task_time_limit (%d) must be below config.visibility_timeout (%d): a task still running when its message becomes visible again is run twice at once" $hard $visibility) -}}
{{- end -}}
{{- if le $lock $hard -}}
{{- fail (printf "config.lock_ttl (%d) must exceed config.task_time_limit (%d): a document's lock would expire while its task still runs" $lock $hard) -}}
{{- end -}}
{{- $extract := float64 (dig "extract_max_seconds" 60 $c) -}}
{{- if ge $extract (float64 $soft) -}}
{{- fail (printf "config.extract_max_seconds (%v) must be below config.task_soft_time_limit (%d): a document still being read at the soft time limit is parked as failed, not indexed with what extract_max_seconds let it read" $extract $soft) -}}
{{- end -}}
{{- $chunk := int (dig "chunk_tokens" 200 $c) -}}
{{- $overlap := int (dig "chunk_overlap_tokens" 32 $c) -}}
{{- if ge $overlap $chunk -}}
{{- fail (printf "config.chunk_overlap_tokens (%d) must be below config.chunk_tokens (%d)" $overlap $chunk) -}}
{{- end -}}
{{- $replication := int (include "ncindex.qdrantReplicationFactor" .) -}}
{{- $consistency := int (dig "qdrant_write_consistency_factor" 1 $c) -}}
{{- if gt $consistency $replication -}}
{{- fail (printf "config.qdrant_write_consistency_factor (%d) must not exceed the replication factor (%d, config.qdrant_replication_factor%s): set config.qdrant_replication_factor too" $consistency $replication (ternary "" " unset" (hasKey $c "qdrant_replication_factor"))) -}}
{{- end -}}
{{- end -}}

{{/* The replication factor of the collections ncindex creates: config.qdrant_replication_factor,
else 2 with qdrant.enabled and qdrant.replicaCount of 2 or more (a drained node takes no shard's
only copy), else 1 (the settings' default). */}}
{{- define "ncindex.qdrantReplicationFactor" -}}
{{- if hasKey .Values.config "qdrant_replication_factor" -}}
{{- int .Values.config.qdrant_replication_factor -}}
{{- else if and .Values.qdrant.enabled (ge (int .Values.qdrant.replicaCount) 2) -}}
2
{{- else -}}
1
{{- end -}}
{{- end -}}
