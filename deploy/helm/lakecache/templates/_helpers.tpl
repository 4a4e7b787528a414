{{/* Names, labels and the pieces every pod template shares. */}}

{{- define "lakecache.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lakecache.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "worker"). */}}
{{- define "lakecache.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lakecache.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "lakecache.labels" -}}
{{ include "lakecache.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "lakecache.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* What workers, mounts and the load Job dial: the master's Service, or with several masters
each master pod by its stable DNS name (the clients follow the leader among them). */}}
{{- define "lakecache.masterAddress" -}}
{{- $name := printf "%s-master" (include "lakecache.fullname" .) -}}
{{- if le (int .Values.master.replicas) 1 -}}
{{ $name }}:{{ .Values.master.port }}
{{- else -}}
{{- $list := list -}}
{{- range $i := until (int .Values.master.replicas) -}}
{{- $list = append $list (printf "%s-%d.%s:%d" $name $i $name (int $.Values.master.port)) -}}
{{- end -}}
{{ join "," $list }}
{{- end -}}
{{- end -}}

{{/* The master's etcd flags (none without etcd.endpoints). */}}
{{- define "lakecache.etcdArgs" -}}
{{- $e := .Values.etcd -}}
{{- if $e.endpoints }}
- --etcd
- {{ join "," $e.endpoints | quote }}
- --etcd-prefix
- {{ $e.prefix | default (printf "/lakecache/%s/" .Release.Name) | quote }}
- --election-ttl
- {{ .Values.master.electionTTL | quote }}
{{- if $e.tls.existingSecret }}
- --etcd-ca
- /etc/lakecache/etcd/ca.crt
{{- if $e.tls.clientCertificate }}
- --etcd-cert
- /etc/lakecache/etcd/tls.crt
- --etcd-key
- /etc/lakecache/etcd/tls.key
{{- end }}
{{- end }}
{{- if $e.auth.user }}
- --etcd-user
- {{ $e.auth.user | quote }}
- --etcd-password-file
- /etc/lakecache/etcd-auth/password
{{- end }}
{{- end }}
{{- end -}}

{{/* Quantities ("1.5Gi", "512Mi", "10G", "4096") as a whole number of bytes. */}}
{{- define "lakecache.bytes" -}}
{{- $q := toString . | trim -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $q -}}
{{- $units := dict "" 1 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "Pi" 1125899906842624 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "P" 1000000000000000 -}}
{{- $unit := trimPrefix $number $q -}}
{{- if or (not $number) (not (hasKey $units $unit)) -}}
{{- fail (printf "%q is not a quantity (use e.g. 512Mi, 2Gi, 10G)" $q) -}}
{{- end -}}
{{- mulf (float64 $number) (get $units $unit) | ceil | int64 -}}
{{- end -}}

{{/*
The worker's hugepages-2Mi limit with worker.hugePages: memCache rounded up to whole 2Mi pages.
*/}}
{{- define "lakecache.worker.hugePagesLimit" -}}
{{- $mem := include "lakecache.bytes" .Values.worker.memCache | int64 -}}
{{- printf "%dMi" (mul (div (add $mem 2097151) 2097152) 2) -}}
{{- end -}}

{{/* Bytes of the worker's Memory-medium (tmpfs) tiers: their sizeLimit, else their size. */}}
{{- define "lakecache.worker.memoryTiers" -}}
{{- $total := 0 -}}
{{- range .Values.worker.tiers -}}
{{- if and (eq .type "emptyDir") (eq (.medium | default "") "Memory") -}}
{{- $total = add $total (include "lakecache.bytes" (.sizeLimit | default .size)) -}}
{{- end -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/*
The worker's memory limit: shared-memory (memfd) and tmpfs pages are charged to its cgroup, so it
must hold --mem-cache + Memory-medium tiers + the overhead. A limit set below that fails; unset,
it is that sum in MiB.
*/}}
{{- define "lakecache.worker.memoryLimit" -}}
{{- $w := .Values.worker -}}
{{- $mem := include "lakecache.bytes" $w.memCache | int64 -}}
{{- if $w.hugePages }}{{ $mem = 0 }}{{ end -}}
{{- $tiers := include "lakecache.worker.memoryTiers" . | int64 -}}
{{- $need := add $mem $tiers (include "lakecache.bytes" $w.memoryOverhead) -}}
{{- $set := dig "limits" "memory" "" $w.resources -}}
{{- if $set -}}
{{- if lt (include "lakecache.bytes" $set | int64) $need -}}
{{- fail (printf "worker.resources.limits.memory %s is below what the worker holds in memory: worker.memCache %s + Memory-medium tiers %d bytes + worker.memoryOverhead %s = %d bytes (shared-memory and tmpfs pages are charged to the worker); raise it or leave it unset" (toString $set) (toString $w.memCache) $tiers (toString $w.memoryOverhead) $need) -}}
{{- end -}}
{{- $set -}}
{{- else -}}
{{- printf "%dMi" (div (add $need 1048575) 1048576) -}}
{{- end -}}
{{- end -}}

{{/*
The config: YAML from namespaces, or .properties from the jindofs block. Namespace names, in
order, come from one of them.
*/}}
{{- define "lakecache.usesProperties" -}}
{{- if .Values.jindofs }}true{{ end -}}
{{- end -}}

{{- define "lakecache.configFile" -}}
{{- if include "lakecache.usesProperties" . -}}
/etc/lakecache/config.properties
{{- else -}}
/etc/lakecache/config.yaml
{{- end -}}
{{- end -}}

{{- define "lakecache.namespaceNames" -}}
{{- if include "lakecache.usesProperties" . -}}
{{- $names := list -}}
{{- range splitList "," (get .Values.jindofs "jfs.namespaces" | default "" | toString) -}}
{{- if trim . }}{{ $names = append $names (trim .) }}{{ end -}}
{{- end -}}
{{- join "," $names -}}
{{- else -}}
{{- keys .Values.namespaces | sortAlpha | join "," -}}
{{- end -}}
{{- end -}}

{{/* Where each namespace's keys come from: {ns: {existingSecret, accessKeyKey, secretKeyKey}}. */}}
{{- define "lakecache.storeSecrets" -}}
{{- $out := dict -}}
{{- $sources := .Values.namespaces -}}
{{- if include "lakecache.usesProperties" . }}{{ $sources = .Values.jindofs.secrets | default dict }}{{ end -}}
{{- range $ns, $v := $sources -}}
{{- if $v.existingSecret -}}
{{- $_ := set $out $ns (dict "existingSecret" $v.existingSecret "accessKeyKey" ($v.accessKeyKey | default "access_key") "secretKeyKey" ($v.secretKeyKey | default "secret_key")) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{- define "lakecache.storeKeyDir" -}}
/etc/lakecache/stores/{{ . }}
{{- end -}}

{{/* Everything the chart refuses, with the value to change. */}}
{{- define "lakecache.validate" -}}
{{- if and .Values.namespaces .Values.jindofs -}}
{{- fail "set namespaces or jindofs, not both: they are two ways to write the same config" -}}
{{- end -}}
{{- if not (include "lakecache.namespaceNames" .) -}}
{{- fail "no namespaces: set namespaces.<name>.uri (or jindofs with jfs.namespaces); the master serves nothing without one" -}}
{{- end -}}
{{- if and (gt (int .Values.master.replicas) 1) (not .Values.etcd.endpoints) -}}
{{- fail (printf "master.replicas %d needs etcd.endpoints: several masters share the membership and elect a leader through etcd" (int .Values.master.replicas)) -}}
{{- end -}}
{{- if and .Values.etcd.auth.user (not .Values.etcd.auth.existingSecret) -}}
{{- fail "etcd.auth.user needs etcd.auth.existingSecret: the Secret holding the user's password" -}}
{{- end -}}
{{- if and .Values.etcd.tls.clientCertificate (not .Values.etcd.tls.existingSecret) -}}
{{- fail "etcd.tls.clientCertificate needs etcd.tls.existingSecret: the Secret with tls.crt and tls.key" -}}
{{- end -}}
{{- range .Values.etcd.endpoints -}}
{{- if and $.Values.etcd.tls.existingSecret (not (hasPrefix "https://" .)) -}}
{{- fail (printf "etcd.endpoints %s: etcd.tls.existingSecret needs https:// endpoints" .) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) -}}
{{- fail "tls.enabled needs tls.existingSecret: a Secret made from the folder `lakecache cert --dir DIR` writes (the chart never makes keys)" -}}
{{- end -}}
{{- range $key, $_ := .Values.jindofs -}}
{{- if regexMatch "\\.access\\.(secret|key)$" $key -}}
{{- fail (printf "jindofs.%s would put a key in a ConfigMap: give the namespace's Secret in jindofs.secrets.<ns>.existingSecret" $key) -}}
{{- end -}}
{{- end -}}
{{- $names := splitList "," (include "lakecache.namespaceNames" .) -}}
{{- range $ns, $_ := (.Values.jindofs.secrets | default dict) -}}
{{- if not (has $ns $names) -}}
{{- fail (printf "jindofs.secrets.%s: %s is not listed in jfs.namespaces" $ns $ns) -}}
{{- end -}}
{{- end -}}
{{- range $i, $t := .Values.worker.tiers -}}
{{- if and (eq $t.type "emptyDir") $t.sizeLimit (gt (include "lakecache.bytes" $t.size | int64) (include "lakecache.bytes" $t.sizeLimit | int64)) -}}
{{- fail (printf "worker.tiers[%d]: size %s is above its sizeLimit %s: the kubelet would evict the worker once the cache fills the emptyDir" $i (toString $t.size) (toString $t.sizeLimit)) -}}
{{- end -}}
{{- end -}}
{{- $_ := include "lakecache.worker.memoryLimit" . -}}
{{- $mx := .Values.metrics -}}
{{- if and $mx.serviceMonitor.enabled (not $mx.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled: the ServiceMonitor would select pods that serve no metrics" -}}
{{- end -}}
{{- if $mx.enabled -}}
{{- $seen := dict -}}
{{- $ports := list (list "master.port" .Values.master.port) (list "worker.port" .Values.worker.port) (list "worker.dataPort" .Values.worker.dataPort) (list "metrics.ports.master" $mx.ports.master) (list "metrics.ports.worker" $mx.ports.worker) (list "metrics.ports.fuse" $mx.ports.fuse) -}}
{{- range $ports -}}
{{- $port := toString (index . 1 | int) -}}
{{- if hasKey $seen $port -}}
{{- fail (printf "%s %s is also %s: give each port the chart opens a number of its own" (index . 0) $port (get $seen $port)) -}}
{{- end -}}
{{- $_ := set $seen $port (index . 0) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The credentials Secret volume of one role: (dict "ctx" $ "items" (list "ca.crt" ...)), and
"metrics" true for a role that serves metrics (it checks scrapers against metrics.token).
*/}}
{{- define "lakecache.credentialsVolume" -}}
{{- if .ctx.Values.tls.enabled }}
{{- $items := .items }}
{{- if and .metrics .ctx.Values.metrics.enabled }}{{ $items = append $items "metrics.token" }}{{ end }}
- name: credentials
  secret:
    secretName: {{ .ctx.Values.tls.existingSecret }}
    defaultMode: 0400
    items:
    {{- range $items }}
      - {key: {{ . }}, path: {{ . }}}
    {{- end }}
{{- end }}
{{- end -}}

{{- define "lakecache.credentialsMount" -}}
{{- if .Values.tls.enabled }}
- {name: credentials, mountPath: /etc/lakecache/credentials, readOnly: true}
{{- end }}
{{- end -}}

{{/*
--credentials DIR with TLS; without, servers say --insecure and clients nothing. A mount that
serves metrics is a server.
*/}}
{{- define "lakecache.credentialsArgs" -}}
{{- if .ctx.Values.tls.enabled }}
- --credentials
- /etc/lakecache/credentials
{{- else if .server }}
- --insecure
{{- end }}
{{- end -}}

{{- define "lakecache.configVolume" -}}
- name: config
  configMap:
    name: {{ include "lakecache.fullname" . }}-config
{{- end -}}

{{- define "lakecache.configMount" -}}
{{- $file := include "lakecache.configFile" . -}}
- {name: config, mountPath: {{ $file }}, subPath: {{ base $file }}, readOnly: true}
{{- end -}}

{{/* The object-store key Secrets, one volume per namespace that names one. */}}
{{- define "lakecache.storeVolumes" -}}
{{- range $ns, $s := include "lakecache.storeSecrets" . | fromJson }}
- name: store-{{ $ns | lower | replace "_" "-" | replace "." "-" }}
  secret:
    secretName: {{ $s.existingSecret }}
    defaultMode: 0400
    items:
      - {key: {{ $s.accessKeyKey }}, path: access_key}
      - {key: {{ $s.secretKeyKey }}, path: secret_key}
{{- end }}
{{- end -}}

{{- define "lakecache.storeMounts" -}}
{{- range $ns, $_ := include "lakecache.storeSecrets" . | fromJson }}
- name: store-{{ $ns | lower | replace "_" "-" | replace "." "-" }}
  mountPath: {{ include "lakecache.storeKeyDir" $ns }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* Exec probes (kubelet's own gRPC probes cannot present TLS or tokens): (dict "target" ARGS). */}}
{{- define "lakecache.probes" -}}
startupProbe:
  exec:
    command: [/usr/local/bin/lakecache, health, {{ .target | join ", " }}, --live]
  periodSeconds: 2
  failureThreshold: 60
  timeoutSeconds: 5
readinessProbe:
  exec:
    command: [/usr/local/bin/lakecache, health, {{ .target | join ", " }}]
  periodSeconds: 10
  failureThreshold: 3
  timeoutSeconds: 5
livenessProbe:
  exec:
    command: [/usr/local/bin/lakecache, health, {{ .target | join ", " }}, --live]
  periodSeconds: 20
  failureThreshold: 3
  timeoutSeconds: 5
{{- end -}}

{{/* The metrics listener of one role: (dict "ctx" $ "role" "master"|"worker"|"fuse"). */}}
{{- define "lakecache.metricsPort" -}}
{{- get .ctx.Values.metrics.ports .role | int -}}
{{- end -}}

{{- define "lakecache.metricsArgs" -}}
{{- if .ctx.Values.metrics.enabled }}
- --metrics-listen
- 0.0.0.0:{{ include "lakecache.metricsPort" . }}
{{- end }}
{{- end -}}

{{- define "lakecache.metricsContainerPort" -}}
{{- if .ctx.Values.metrics.enabled }}
- {name: metrics, containerPort: {{ include "lakecache.metricsPort" . }}, protocol: TCP}
{{- end }}
{{- end -}}

{{/* For scrapers that find pods by annotation (Prometheus's kubernetes-pods job). */}}
{{- define "lakecache.metricsAnnotations" -}}
{{- if .ctx.Values.metrics.enabled }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ include "lakecache.metricsPort" . | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{- define "lakecache.podIPEnv" -}}
- name: POD_IP
  valueFrom:
    fieldRef: {fieldPath: status.podIP}
{{- end -}}

{{/* Placement of one component's pods: the component's values. */}}
{{- define "lakecache.placement" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "lakecache.nonRootPod" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
  seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "lakecache.nonRootContainer" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: [ALL]}
{{- end -}}

{{/* worker.tiers as cache.disks entries (capacity in bytes): a JSON list. */}}
{{- define "lakecache.diskList" -}}
{{- $disks := list -}}
{{- range .Values.worker.tiers -}}
{{- $d := dict "path" .path "capacity" (include "lakecache.bytes" .size) -}}
{{- if .minFree }}{{ $_ := set $d "min_free" .minFree }}{{ end -}}
{{- $disks = append $disks $d -}}
{{- end -}}
{{- toJson $disks -}}
{{- end -}}
