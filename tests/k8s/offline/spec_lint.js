// What the schemas cannot see in a lakecache deployment or a training job: mount propagation and
// privilege, the FUSE pod's device and unmount, probes that need no network credentials, secrets
// in ConfigMaps, the worker's memory limit, how training pods map the host's lake folder, and
// the metrics listeners: their port, token and scrape annotations, and what a ServiceMonitor
// reaches through its Services (lintObjects, over all the objects of a release).
'use strict';

const UNITS = {
  '': 1, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50,
  k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15,
};

// A Kubernetes quantity (or a plain byte count) in bytes; NaN when it is neither.
function bytes(q) {
  const m = /^([0-9]+(?:\.[0-9]+)?)([A-Za-z]*)$/.exec(String(q).trim());
  return m && m[2] in UNITS ? Math.ceil(Number(m[1]) * UNITS[m[2]]) : NaN;
}

// Every pod spec of an object, with where it sits and its metadata: Pods, workload templates,
// Kubeflow replicas.
function podSpecs(obj) {
  const spec = obj.spec || {};
  if (obj.kind === 'Pod') return [{where: '/spec', pod: spec, meta: obj.metadata || {}}];
  if (obj.kind === 'PodTemplateSpec') return [{where: '/spec', pod: spec, meta: obj.metadata || {}}];
  if (spec.template && spec.template.spec) {
    return [{where: '/spec/template/spec', pod: spec.template.spec, meta: spec.template.metadata || {}}];
  }
  const replicas = spec.pytorchReplicaSpecs || spec.mpiReplicaSpecs || {};
  const field = spec.pytorchReplicaSpecs ? 'pytorchReplicaSpecs' : 'mpiReplicaSpecs';
  return Object.entries(replicas).map(([role, r]) => ({
    where: `/spec/${field}/${role}/template/spec`,
    pod: (r.template || {}).spec || {},
    meta: (r.template || {}).metadata || {},
  }));
}

function containers(pod) {
  return [...(pod.initContainers || []), ...(pod.containers || [])];
}

const isLakecache = (cmd) => Array.isArray(cmd) && /(^|\/)lakecache$/.test(String(cmd[0]));

function lintProbes(c, at, out) {
  for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
    const p = c[probe];
    if (!p) continue;
    const cmd = p.exec && p.exec.command;
    if (!cmd) {
      out.push(`${at}/${probe}: not an exec probe (kubelet's HTTP/gRPC/TCP probes cannot present TLS or tokens)`);
    } else if (!isLakecache(cmd) || cmd[1] !== 'health') {
      out.push(`${at}/${probe}: runs '${cmd.join(' ')}', not 'lakecache health'`);
    }
  }
}

function lintPropagation(c, at, pod, opts, out) {
  const volumes = new Map((pod.volumes || []).map((v) => [v.name, v]));
  const privileged = !!(c.securityContext && c.securityContext.privileged);
  (c.volumeMounts || []).forEach((m, i) => {
    const where = `${at}/volumeMounts/${i}`;
    if (m.mountPropagation === 'Bidirectional' && !privileged) {
      out.push(`${where}: mountPropagation Bidirectional needs securityContext.privileged: true`);
    }
    const v = volumes.get(m.name);
    const host = v && v.hostPath && v.hostPath.path;
    const underLake = host && (host === opts.lakePath || host.startsWith(`${opts.lakePath}/`));
    if (!underLake || m.mountPropagation === 'Bidirectional') return;
    // readOnly is the job's choice: a job that writes checkpoints maps the folder writable.
    if (m.mountPropagation !== 'HostToContainer') {
      out.push(`${where}: host folder ${host} must be mounted with mountPropagation HostToContainer (a remount would stay invisible)`);
    }
  });
}

function hasFuseDevice(c, pod) {
  const volumes = new Map((pod.volumes || []).map((v) => [v.name, v]));
  const dev = (c.volumeMounts || []).find((m) => m.mountPath === '/dev/fuse');
  const v = dev && volumes.get(dev.name);
  return !!(v && v.hostPath && v.hostPath.path === '/dev/fuse' && v.hostPath.type === 'CharDevice');
}

// The holder mounts: it needs the device, and Bidirectional propagation for the mount to reach
// the host (lintPropagation checks that this needs privilege).
function lintHolder(c, at, pod, out) {
  if (!hasFuseDevice(c, pod)) {
    out.push(`${at}: the holder has no /dev/fuse (hostPath /dev/fuse, type CharDevice)`);
  }
  if (!(c.volumeMounts || []).some((m) => m.mountPropagation === 'Bidirectional')) {
    out.push(`${at}: the holder mounts the lake folder without mountPropagation Bidirectional (its mount would not reach the host)`);
  }
}

function lintFuse(c, at, pod, out) {
  const args = c.args || [];
  const stop = c.lifecycle && c.lifecycle.preStop && c.lifecycle.preStop.exec;
  const unmounts = !!(stop && isLakecache(stop.command) && stop.command[1] === 'umount');
  if (args.includes('--holder')) {
    // The holder keeps the mount across this pod's restarts: unmounting would end it for all.
    if (unmounts) {
      out.push(`${at}: the FUSE container serves a holder's mount but unmounts it in preStop (a pod restart would break every reader)`);
    }
    // Starting the container stats what it maps: the mount, waiting for the server it starts.
    const volumes = new Map((pod.volumes || []).map((v) => [v.name, v]));
    const lake = args[args.indexOf('mount') + 1];
    for (const m of c.volumeMounts || []) {
      const host = ((volumes.get(m.name) || {}).hostPath || {}).path || '';
      if (lake && (host === lake || m.mountPath === lake)) {
        out.push(`${at}: the FUSE container serves a holder's mount but maps its folder ${lake} (a restart would wait on its own mount)`);
      }
    }
  } else {
    if (!hasFuseDevice(c, pod)) {
      out.push(`${at}: the FUSE container has no /dev/fuse (hostPath /dev/fuse, type CharDevice)`);
    }
    if (!unmounts) out.push(`${at}: the FUSE container has no preStop 'lakecache umount'`);
  }
  // Training pods run as their own uids: without allow_other the kernel refuses them every path.
  const o = args.flatMap((a, i) => (a === '-o' ? String(args[i + 1] || '').split(',') : []));
  if (!o.includes('allow_other')) {
    out.push(`${at}: the FUSE container mounts without -o allow_other (pods of other uids could not read it)`);
  }
}

function lintWorkerMemory(c, at, pod, out) {
  const args = c.args || [];
  const i = args.indexOf('--mem-cache');
  const memCache = i >= 0 ? bytes(args[i + 1]) : 2 ** 30;
  const volumes = new Map((pod.volumes || []).map((v) => [v.name, v]));
  let tiers = 0;
  for (const m of c.volumeMounts || []) {
    const e = (volumes.get(m.name) || {}).emptyDir;
    if (e && e.medium === 'Memory') tiers += bytes(e.sizeLimit || 0);
  }
  const limits = (c.resources && c.resources.limits) || {};
  const limit = limits.memory;
  // In reserved huge pages (cache.memory.huge_pages=hugetlb) the memory tier is charged to
  // hugepages-2Mi, not to memory.
  const huge = args.some((a, j) => args[j - 1] === '-o' && a === 'cache.memory.huge_pages=hugetlb');
  const inMemory = huge ? 0 : memCache;
  if (huge && !(bytes(limits['hugepages-2Mi'] || 0) >= memCache)) {
    out.push(`${at}: the worker's memory tier is in huge pages but its hugepages-2Mi limit ${limits['hugepages-2Mi']} is below --mem-cache (${memCache} bytes)`);
  }
  if (!limit) {
    out.push(`${at}: the worker has no memory limit (its shared memory is charged to it)`);
  } else if (!(bytes(limit) > inMemory + tiers)) {
    out.push(`${at}: the worker's memory limit ${limit} is not above --mem-cache plus its Memory-medium tiers (${inMemory + tiers} bytes)`);
  }
}

// --metrics-listen HOST:PORT of a lakecache container: {host, port}, or null.
function metricsListen(c) {
  const args = c.args || [];
  const i = args.indexOf('--metrics-listen');
  if (i < 0) return null;
  const m = /^\[?(.*?)\]?:([0-9]+)$/.exec(String(args[i + 1] || ''));
  return m ? {host: m[1], port: Number(m[2])} : {host: String(args[i + 1]), port: NaN};
}

const isLoopback = (host) => host === 'localhost' || host === '::1' || /^127\./.test(host);

// The Secret volume mounted at the container's --credentials folder: {volume, secret}, or null.
function credentialsSecret(c, pod) {
  const args = c.args || [];
  const i = args.indexOf('--credentials');
  if (i < 0) return null;
  const m = (c.volumeMounts || []).find((v) => v.mountPath === args[i + 1]);
  const v = m && (pod.volumes || []).find((x) => x.name === m.name);
  return v && v.secret ? {volume: v.name, secret: v.secret} : null;
}

// A metrics listener beyond loopback: the daemon serves it only with --credentials (scrapers
// present the folder's metrics.token) or --insecure; Services and ServiceMonitors name its port.
function lintMetrics(c, at, pod, out) {
  const listen = metricsListen(c);
  if (!listen || isLoopback(listen.host)) return;
  const args = c.args || [];
  const where = `${at}: --metrics-listen ${listen.host}:${listen.port}`;
  if (!args.includes('--credentials') && !args.includes('--insecure')) {
    out.push(`${where} is beyond loopback without --credentials or --insecure (the daemon refuses to start)`);
  }
  if (!(c.ports || []).some((p) => p.name === 'metrics' && p.containerPort === listen.port)) {
    out.push(`${where} has no containerPort {name: metrics, containerPort: ${listen.port}} (Services and ServiceMonitors name it)`);
  }
  const creds = credentialsSecret(c, pod);
  if (creds && creds.secret.items && !creds.secret.items.some((item) => item.key === 'metrics.token' && item.path === 'metrics.token')) {
    out.push(`${where} checks scrapers against the credentials folder's metrics.token, but volume ${creds.volume} does not map it`);
  }
}

// prometheus.io/scrape annotations name the port and path a container's --metrics-listen serves.
function lintScrapeAnnotations(pod, meta, where, out) {
  const a = meta.annotations || {};
  if (a['prometheus.io/scrape'] === undefined) return;
  const at = `${where.replace(/\/spec$/, '')}/metadata/annotations`;
  if (a['prometheus.io/scrape'] !== 'true') {
    out.push(`${at}: prometheus.io/scrape is ${JSON.stringify(a['prometheus.io/scrape'])}, not "true"`);
    return;
  }
  const ports = containers(pod).map(metricsListen).filter((l) => l).map((l) => l.port);
  if (!ports.length) {
    out.push(`${at}: prometheus.io/scrape "true" on a pod whose containers have no --metrics-listen`);
  } else if (!ports.map(String).includes(String(a['prometheus.io/port']))) {
    out.push(`${at}: prometheus.io/port ${JSON.stringify(a['prometheus.io/port'])} is not the --metrics-listen port (${ports.join(', ')})`);
  }
  if (a['prometheus.io/path'] !== undefined && a['prometheus.io/path'] !== '/metrics') {
    out.push(`${at}: prometheus.io/path ${JSON.stringify(a['prometheus.io/path'])} is not /metrics`);
  }
}

const SECRET_PATTERNS = [
  [/lctok_[0-9a-f]{16,}/, 'a role token'],
  [/-----BEGIN [A-Z ]*PRIVATE KEY-----/, 'a private key'],
  [/^\s*(secret_key|session_token|access_key)\s*:\s*\S/m, 'an object-store key'],
  [/\.access\.(secret|key)\s*=/, 'an object-store key'],
];

function lintConfigMap(obj, out) {
  for (const [key, value] of Object.entries(obj.data || {})) {
    for (const [re, what] of SECRET_PATTERNS) {
      if (re.test(String(value))) out.push(`/data/${key}: holds ${what}: secrets belong in a Secret`);
    }
  }
}

// Whether a pod maps the lake folder (or one under it) with HostToContainer.
function mapsLake(pod, lakePath) {
  const volumes = new Map((pod.volumes || []).map((v) => [v.name, v]));
  return containers(pod).some((c) => (c.volumeMounts || []).some((m) => {
    const host = ((volumes.get(m.name) || {}).hostPath || {}).path || '';
    return m.mountPropagation === 'HostToContainer' && (host === lakePath || host.startsWith(`${lakePath}/`));
  }));
}

// Problems of one object; opts: {lakePath, training}. A training object (a Pod, or a Kubeflow
// job, whose launcher may read no data) maps the lake folder in at least one pod.
function lintObject(obj, opts) {
  const out = [];
  if (obj.kind === 'ConfigMap') lintConfigMap(obj, out);
  const specs = podSpecs(obj);
  for (const {where, pod, meta} of specs) {
    lintScrapeAnnotations(pod, meta, where, out);
    const inits = pod.initContainers || [];
    containers(pod).forEach((c) => {
      const list = inits.includes(c) ? 'initContainers' : 'containers';
      const at = `${where}/${list}/${(pod[list] || []).indexOf(c)} (${c.name})`;
      lintProbes(c, at, out);
      lintPropagation(c, at, pod, opts, out);
      const role = (c.args || [])[0];
      if (role === 'mount') lintFuse(c, at, pod, out);
      if (role === 'holder') lintHolder(c, at, pod, out);
      if (role === 'worker') lintWorkerMemory(c, at, pod, out);
      lintMetrics(c, at, pod, out);
    });
  }
  if (opts.training && !specs.some(({pod}) => mapsLake(pod, opts.lakePath))) {
    out.push(`a training job whose pods map no host folder under ${opts.lakePath} with mountPropagation HostToContainer`);
  }
  return out;
}

function matchesSelector(labels, selector) {
  labels = labels || {};
  const sel = selector || {};
  const exprs = sel.matchExpressions || [];
  return Object.entries(sel.matchLabels || {}).every(([k, v]) => labels[k] === v) && exprs.every((e) => {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    if (e.operator === 'In') return has && (e.values || []).includes(labels[e.key]);
    if (e.operator === 'NotIn') return !has || !(e.values || []).includes(labels[e.key]);
    if (e.operator === 'Exists') return has;
    return !has;  // DoesNotExist
  });
}

const nameOf = (obj) => `${obj.kind}/${(obj.metadata || {}).name}`;

// The Secret key an endpoint sends as its token: {name, key}, or null.
function endpointToken(ep) {
  const a = ep.authorization;
  if (a && a.credentials && (a.type || 'Bearer') === 'Bearer') return a.credentials;
  if (ep.bearerTokenSecret) return ep.bearerTokenSecret;
  if (ep.basicAuth && ep.basicAuth.password) return ep.basicAuth.password;
  return null;
}

// Problems across the objects of one release, as [{name, problem}]: each ServiceMonitor must
// reach, through the Services it selects, the metrics port of pods that serve metrics, with the
// token those pods check; and with a ServiceMonitor, every pod that serves metrics beyond
// loopback must be one it reaches.
function lintObjects(objs) {
  const out = [];
  const services = objs.filter((o) => o.kind === 'Service');
  const workloads = objs.filter((o) => o.kind !== 'Service' && podSpecs(o).some(({pod}) => containers(pod).length));
  const monitors = objs.filter((o) => o.kind === 'ServiceMonitor');
  const reached = new Set();
  for (const sm of monitors) {
    const problem = (p) => out.push({name: nameOf(sm), problem: p});
    const spec = sm.spec || {};
    const selected = services.filter((svc) => matchesSelector((svc.metadata || {}).labels, spec.selector));
    if (!selected.length) problem('/spec/selector: selects no Service');
    (spec.endpoints || []).forEach((ep, i) => {
      const at = `/spec/endpoints/${i}`;
      for (const svc of selected) {
        const svcPort = ((svc.spec || {}).ports || []).find((p) => p.name === ep.port);
        if (!svcPort) {
          problem(`${at}: ${nameOf(svc)} has no port named ${ep.port}`);
          continue;
        }
        const target = svcPort.targetPort === undefined ? svcPort.port : svcPort.targetPort;
        const pods = workloads.filter((w) => podSpecs(w).some(({meta}) => matchesSelector(meta.labels, {matchLabels: (svc.spec || {}).selector})));
        if (!pods.length) problem(`${at}: ${nameOf(svc)} selects no pods`);
        for (const w of pods) {
          for (const {pod} of podSpecs(w)) {
            for (const c of containers(pod)) {
              const port = (c.ports || []).find((p) => (typeof target === 'string' ? p.name === target : p.containerPort === target));
              if (!port) continue;
              const listen = metricsListen(c);
              if (!listen || listen.port !== port.containerPort) {
                problem(`${at}: ${nameOf(svc)} port ${ep.port} reaches port ${port.containerPort} of ${nameOf(w)}, which is not its --metrics-listen port`);
                continue;
              }
              reached.add(w);
              const creds = credentialsSecret(c, pod);
              const token = endpointToken(ep);
              if (creds && !token) {
                problem(`${at}: ${nameOf(w)} checks the metrics.token of Secret ${creds.secret.secretName}, but the endpoint sends no token (authorization)`);
              } else if (creds && (token.name !== creds.secret.secretName || token.key !== 'metrics.token')) {
                problem(`${at}: the endpoint sends key ${token.key} of Secret ${token.name}; ${nameOf(w)} checks metrics.token of Secret ${creds.secret.secretName}`);
              }
            }
          }
        }
      }
    });
  }
  if (monitors.length) {
    for (const w of workloads) {
      const serves = podSpecs(w).some(({pod}) => containers(pod).some((c) => {
        const l = metricsListen(c);
        return l && !isLoopback(l.host);
      }));
      if (serves && !reached.has(w)) {
        out.push({name: nameOf(w), problem: `serves metrics, but no ServiceMonitor (${monitors.map(nameOf).join(', ')}) reaches its pods`});
      }
    }
  }
  return out;
}

module.exports = {lintObject, lintObjects, podSpecs, bytes};
