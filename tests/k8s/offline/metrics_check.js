// node metrics_check.js CHART_VALUES VALUES RENDERED: what the chart's metrics values make of a
// release (RENDERED, `helm template` with VALUES over the chart's CHART_VALUES):
//  - metrics.enabled: the master, worker and FUSE containers serve --metrics-listen
//    0.0.0.0:<metrics.ports.ROLE> with a containerPort named metrics, their pods carry the
//    prometheus.io/scrape, port and path annotations, and each has --credentials with
//    metrics.token in its credentials volume (tls.enabled) or --insecure; the holder and the load
//    Job serve none;
//  - metrics.enabled false: no metrics listener, port, annotation, token or --insecure on a mount;
//  - metrics.serviceMonitor.enabled: one ServiceMonitor with the interval and labels asked for, a
//    Bearer token from tls.existingSecret's metrics.token with TLS (none without), and one
//    headless Service per role on its metrics port; disabled: neither.
// Prints one line per check and one per problem; exits 1 when there is any problem.
'use strict';

const fs = require('fs');
const YAML = require('yaml');

// Helm's merge of a values file over the chart's values: maps merge, everything else replaces.
function mergeValues(base, over) {
  if (!over || typeof over !== 'object' || Array.isArray(over)) return over === undefined ? base : over;
  const out = {...(base && typeof base === 'object' && !Array.isArray(base) ? base : {})};
  for (const [k, v] of Object.entries(over)) out[k] = mergeValues(out[k], v);
  return out;
}

const ROLES = {master: 'StatefulSet', worker: 'DaemonSet', fuse: 'DaemonSet'};

function main([chartValues, valuesFile, rendered]) {
  const values = mergeValues(YAML.parse(fs.readFileSync(chartValues, 'utf8')), YAML.parse(fs.readFileSync(valuesFile, 'utf8')) || {});
  const objs = YAML.parseAllDocuments(fs.readFileSync(rendered, 'utf8')).map((d) => d.toJS()).filter((o) => o);
  const m = values.metrics;
  const tls = values.tls.enabled;
  const problems = [];
  const checks = [];
  const expect = (ok, what) => {
    if (!ok) problems.push(what);
  };
  const component = (o) => ((o.metadata || {}).labels || {})['app.kubernetes.io/component'];
  const template = (o) => (o.spec || {}).template || {};

  for (const [role, kind] of Object.entries(ROLES)) {
    const w = objs.find((o) => o.kind === kind && component(o) === role);
    if (!w) {
      problems.push(`no ${kind} of component ${role}`);
      continue;
    }
    const name = `${kind}/${w.metadata.name}`;
    const ann = template(w).metadata.annotations || {};
    const spec = template(w).spec;
    const c = spec.containers[0];
    const args = c.args || [];
    const i = args.indexOf('--metrics-listen');
    const port = m.ports[role];
    const metricsPorts = (c.ports || []).filter((p) => p.name === 'metrics');
    const creds = (spec.volumes || []).find((v) => v.name === 'credentials');
    const token = !!(creds && creds.secret.items.some((item) => item.key === 'metrics.token'));
    if (m.enabled) {
      expect(i >= 0 && args[i + 1] === `0.0.0.0:${port}`, `${name}: args have no --metrics-listen 0.0.0.0:${port}`);
      expect(metricsPorts.length === 1 && metricsPorts[0].containerPort === port, `${name}: no containerPort {name: metrics, containerPort: ${port}}`);
      expect(ann['prometheus.io/scrape'] === 'true', `${name}: pod annotation prometheus.io/scrape is not "true"`);
      expect(ann['prometheus.io/port'] === String(port), `${name}: pod annotation prometheus.io/port is ${JSON.stringify(ann['prometheus.io/port'])}, not "${port}"`);
      expect(ann['prometheus.io/path'] === '/metrics', `${name}: pod annotation prometheus.io/path is not /metrics`);
      if (tls) {
        expect(args.includes('--credentials') && token, `${name}: --credentials without metrics.token in its credentials volume`);
      } else {
        expect(args.includes('--insecure'), `${name}: serves metrics beyond loopback without TLS and without --insecure`);
      }
      checks.push(`${name}: --metrics-listen 0.0.0.0:${port}, containerPort metrics, scrape annotations, ${tls ? 'metrics.token in its credentials' : '--insecure'}`);
    } else {
      expect(i < 0, `${name}: --metrics-listen with metrics.enabled false`);
      expect(!metricsPorts.length, `${name}: a metrics containerPort with metrics.enabled false`);
      expect(!Object.keys(ann).some((k) => k.startsWith('prometheus.io/')), `${name}: prometheus.io annotations with metrics.enabled false`);
      expect(!token, `${name}: metrics.token in its credentials volume with metrics.enabled false`);
      if (role === 'fuse') expect(!args.includes('--insecure'), `${name}: --insecure on a mount that serves nothing`);
      checks.push(`${name}: no metrics listener, port, annotation or token`);
    }
  }
  for (const o of objs.filter((x) => ['holder', 'load'].includes(component(x)))) {
    const t = template(o);
    const ann = (t.metadata || {}).annotations || {};
    const args = ((t.spec || {}).containers || []).flatMap((c) => c.args || []);
    expect(!args.includes('--metrics-listen') && !Object.keys(ann).some((k) => k.startsWith('prometheus.io/')),
      `${o.kind}/${o.metadata.name}: serves or announces metrics (only the master, workers and mounts do)`);
  }

  const monitors = objs.filter((o) => o.kind === 'ServiceMonitor');
  const services = objs.filter((o) => o.kind === 'Service' && ((o.spec || {}).ports || []).some((p) => p.name === 'metrics'));
  if (m.enabled && m.serviceMonitor.enabled) {
    expect(monitors.length === 1, `${monitors.length} ServiceMonitors, not 1`);
    const sm = monitors[0] || {spec: {endpoints: []}, metadata: {}};
    const ep = sm.spec.endpoints[0] || {};
    expect(sm.apiVersion === 'monitoring.coreos.com/v1', `ServiceMonitor apiVersion ${sm.apiVersion}`);
    expect(sm.spec.endpoints.length === 1 && ep.port === 'metrics' && ep.path === '/metrics' && ep.scheme === 'http',
      'the ServiceMonitor does not scrape port metrics, path /metrics, over http');
    expect(ep.interval === (m.serviceMonitor.interval || '30s'), `the ServiceMonitor's interval is ${ep.interval}, not ${m.serviceMonitor.interval}`);
    for (const [k, v] of Object.entries(m.serviceMonitor.labels || {})) {
      expect((sm.metadata.labels || {})[k] === v, `the ServiceMonitor lacks the label ${k}: ${v}`);
    }
    if (tls) {
      const a = ep.authorization || {};
      expect(a.type === 'Bearer' && a.credentials && a.credentials.name === values.tls.existingSecret && a.credentials.key === 'metrics.token',
        `the ServiceMonitor does not send metrics.token of Secret ${values.tls.existingSecret} as a Bearer token`);
    } else {
      expect(!ep.authorization, 'the ServiceMonitor sends a token to servers that serve plain (--insecure)');
    }
    for (const role of Object.keys(ROLES)) {
      const svc = services.find((s) => component(s) === role);
      expect(svc && svc.spec.clusterIP === 'None' && svc.spec.ports.length === 1 && svc.spec.ports[0].port === m.ports[role] &&
        svc.spec.ports[0].targetPort === 'metrics', `no headless Service of the ${role} pods on port ${m.ports[role]} (targetPort metrics)`);
    }
    checks.push(`ServiceMonitor/${sm.metadata.name}: interval ${ep.interval}, ${tls ? `Bearer metrics.token of ${values.tls.existingSecret}` : 'no token'}, ${services.length} headless Services`);
  } else {
    expect(!monitors.length && !services.length, 'a ServiceMonitor or a metrics Service with metrics.serviceMonitor.enabled false');
    checks.push('no ServiceMonitor, no metrics Service');
  }

  for (const c of checks) console.log(`${problems.length ? '    ' : 'ok  '} ${rendered}: ${c}`);
  for (const p of problems) console.log(`FAIL ${rendered}: ${p}`);
  return problems.length ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
