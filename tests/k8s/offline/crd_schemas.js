// Schemas of the custom resources the chart renders, which kubernetes-models does not have: the
// Prometheus Operator's ServiceMonitor (monitoring.coreos.com/v1), the fields of its CRD, written
// out here. checkCustom() reports wrong types, missing required fields, bad enums and patterns,
// and unknown fields; metadata and the label selector go through kubernetes-models' own
// ObjectMeta and LabelSelector validators (validateWith, from schema_check.js).
'use strict';

const str = {type: 'string'};
const bool = {type: 'boolean'};
const int = {type: 'integer'};
const strings = {type: 'array', items: str};
// Prometheus durations: 30s, 1m30s, 500ms.
const duration = {
  type: 'string',
  pattern: /^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$/,
};
const secretKeySelector = {type: 'object', required: ['key'], properties: {key: str, name: str, optional: bool}};
const relabelings = {
  type: 'array',
  items: {
    type: 'object',
    properties: {
      sourceLabels: strings, separator: str, targetLabel: str, regex: str, modulus: int, replacement: str,
      action: {enum: ['replace', 'Replace', 'keep', 'Keep', 'drop', 'Drop', 'hashmod', 'HashMod', 'labelmap',
        'LabelMap', 'labeldrop', 'LabelDrop', 'labelkeep', 'LabelKeep', 'lowercase', 'Lowercase', 'uppercase',
        'Uppercase', 'keepequal', 'KeepEqual', 'dropequal', 'DropEqual']},
    },
  },
};
// TLS and OAuth2 settings are passed through unchecked: the chart renders neither.
const opaque = {type: 'object', opaque: true};

const endpoint = {
  type: 'object',
  properties: {
    port: str,
    targetPort: {type: ['integer', 'string']},
    path: str,
    scheme: {enum: ['http', 'https', 'HTTP', 'HTTPS']},
    params: {type: 'object', additionalProperties: strings},
    interval: duration,
    scrapeTimeout: duration,
    tlsConfig: opaque,
    bearerTokenFile: str,
    bearerTokenSecret: secretKeySelector,
    authorization: {type: 'object', properties: {type: str, credentials: secretKeySelector}},
    basicAuth: {type: 'object', properties: {username: secretKeySelector, password: secretKeySelector}},
    oauth2: opaque,
    honorLabels: bool,
    honorTimestamps: bool,
    trackTimestampsStaleness: bool,
    metricRelabelings: relabelings,
    relabelings,
    proxyUrl: str,
    followRedirects: bool,
    enableHttp2: bool,
    filterRunning: bool,
  },
};

const SCHEMAS = {
  'monitoring.coreos.com/v1 ServiceMonitor': {
    type: 'object',
    required: ['apiVersion', 'kind', 'metadata', 'spec'],
    properties: {
      apiVersion: str,
      kind: str,
      metadata: {ref: 'ObjectMeta'},
      spec: {
        type: 'object',
        required: ['selector'],
        properties: {
          endpoints: {type: 'array', items: endpoint},
          selector: {ref: 'LabelSelector'},
          namespaceSelector: {type: 'object', properties: {any: bool, matchNames: strings}},
          jobLabel: str,
          targetLabels: strings,
          podTargetLabels: strings,
          sampleLimit: int,
          targetLimit: int,
          labelLimit: int,
          labelNameLengthLimit: int,
          labelValueLengthLimit: int,
          keepDroppedTargets: int,
          attachMetadata: {type: 'object', properties: {node: bool}},
          scrapeProtocols: {type: 'array', items: str},
          scrapeClass: str,
          bodySizeLimit: str,
        },
      },
    },
  },
};

function typeOf(v) {
  if (Array.isArray(v)) return 'array';
  if (v === null) return 'null';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function walk(value, schema, path, ctx) {
  if (schema.ref) {
    for (const p of ctx.validateWith(schema.ref, value)) ctx.out.push(`${path}${p}`);
    return;
  }
  if (schema.enum) {
    if (!schema.enum.includes(value)) ctx.out.push(`${path}: must be equal to one of the allowed values (${schema.enum.join(', ')})`);
    return;
  }
  const types = [].concat(schema.type);
  const t = typeOf(value);
  if (!types.includes(t)) {
    ctx.out.push(`${path}: must be ${types.join(',')}`);
    return;
  }
  if (schema.pattern && !schema.pattern.test(value)) ctx.out.push(`${path}: must match pattern "${schema.pattern.source}"`);
  if (t === 'array') {
    value.forEach((v, i) => walk(v, schema.items, `${path}/${i}`, ctx));
  } else if (t === 'object' && !schema.opaque) {
    for (const key of schema.required || []) {
      if (!(key in value)) ctx.out.push(`${path}: missing required field '${key}'`);
    }
    for (const [key, v] of Object.entries(value)) {
      const sub = (schema.properties || {})[key] || schema.additionalProperties;
      if (!sub) {
        ctx.out.push(`${path}/${key}: unknown field (not in the ${ctx.kind} schema)`);
        continue;
      }
      walk(v, sub, `${path}/${key}`, ctx);
    }
  }
}

// Problems of `obj` against its custom resource schema; null when there is none for its kind.
function checkCustom(obj, validateWith) {
  const schema = SCHEMAS[`${obj.apiVersion} ${obj.kind}`];
  if (!schema) return null;
  const ctx = {validateWith, kind: obj.kind, out: []};
  walk(obj, schema, '', ctx);
  return ctx.out;
}

module.exports = {checkCustom};
