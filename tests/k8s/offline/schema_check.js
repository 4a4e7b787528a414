// Checks Kubernetes objects against the Kubernetes 1.27 OpenAPI schemas of kubernetes-models:
// its validate() for wrong types, missing required fields and bad enums, and an unknown-field
// check that walks each object along the same schemas. kubernetes-models ships the schemas
// compiled into validator functions, which read every property their schema defines (and
// enumerate the keys of maps): a field of the object that its validator never read is one the
// schema does not have.
'use strict';

const path = require('path');
const {checkCustom} = require('./crd_schemas.js');

// apiVersion -> [module folder, schema name prefix]
const GROUPS = {
  v1: ['v1', 'IoK8sApiCoreV1'],
  'apps/v1': ['apps/v1', 'IoK8sApiAppsV1'],
  'batch/v1': ['batch/v1', 'IoK8sApiBatchV1'],
  'policy/v1': ['policy/v1', 'IoK8sApiPolicyV1'],
  'rbac.authorization.k8s.io/v1': ['rbac.authorization.k8s.io/v1', 'IoK8sApiRbacV1'],
};

// The package exports its models, not its compiled schemas: those are found beside them.
const SCHEMAS = path.join(path.dirname(require.resolve('kubernetes-models/v1/Pod')), '..', '_schemas');
// ObjectMeta and LabelSelector, for the custom resources' schemas (crd_schemas.js).
const META_SCHEMAS = path.join(
  path.dirname(require.resolve('@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta')), '..', '..', '..', '_schemas');

function load(apiVersion, kind) {
  const group = GROUPS[apiVersion];
  if (!group) return null;
  try {
    return {
      Model: require(`kubernetes-models/${group[0]}/${kind}`)[kind],
      validate: require(path.join(SCHEMAS, `${group[1]}${kind}.js`)).validate,
    };
  } catch (e) {
    return null;
  }
}

function modelErrors(Model, obj) {
  try {
    new Model(obj).validate();
    return [];
  } catch (e) {
    const details = e.errors || e.details;
    if (Array.isArray(details) && details.length) {
      return details.map((d) => `${d.instancePath || '/'}: ${describe(d)}`);
    }
    return [String(e.message || e)];
  }
}

function describe(err) {
  if (err.keyword === 'required') return `missing required field '${err.params.missingProperty}'`;
  if (err.keyword === 'enum') return `${err.message} (${err.params.allowedValues.join(', ')})`;
  if (!err.message && err.keyword === 'type') return `must be ${err.params.type}`;
  return err.message || err.keyword;
}

// Runs `validate` over a proxy of `obj` that records, per JSON path, the keys read and whether
// the keys were enumerated; returns the paths of fields never read.
function unknownFields(validate, obj) {
  const read = new Map();
  const enumerated = new Set();
  const seen = (path) => {
    if (!read.has(path)) read.set(path, new Set());
    return read.get(path);
  };
  const wrap = (value, path) => {
    if (value === null || typeof value !== 'object') return value;
    return new Proxy(value, {
      get(target, key) {
        const v = Reflect.get(target, key);
        if (typeof key !== 'string') return v;
        seen(path).add(key);
        return Object.prototype.hasOwnProperty.call(target, key) ? wrap(v, `${path}/${key}`) : v;
      },
      has(target, key) {
        if (typeof key === 'string') seen(path).add(key);
        return Reflect.has(target, key);
      },
      ownKeys(target) {
        enumerated.add(path);
        return Reflect.ownKeys(target);
      },
    });
  };
  validate(wrap(obj, ''));
  const unknown = [];
  const walk = (value, path) => {
    if (value === null || typeof value !== 'object') return;
    if (Array.isArray(value)) {
      value.forEach((v, i) => walk(v, `${path}/${i}`));
      return;
    }
    const known = read.get(path) || new Set();
    for (const key of Object.keys(value)) {
      if (!enumerated.has(path) && !known.has(key)) {
        unknown.push(`${path}/${key}`);
        continue;
      }
      walk(value[key], `${path}/${key}`);
    }
  };
  walk(obj, '');
  return unknown;
}

// Problems of a value against an apimachinery meta/v1 schema ("ObjectMeta", "LabelSelector").
function validateWith(name, value) {
  const {validate} = require(path.join(META_SCHEMAS, `IoK8sApimachineryPkgApisMetaV1${name}.js`));
  const problems = validate(value) ? [] : (validate.errors || []).map((d) => `${d.instancePath || ''}: ${describe(d)}`);
  for (const p of unknownFields(validate, value)) problems.push(`${p}: unknown field (not in the ${name} schema)`);
  return problems;
}

// Problems of one object against the schema of its kind, or of `as` ("PodTemplateSpec").
function checkObject(obj, as) {
  const kind = as || obj.kind;
  const custom = as ? null : checkCustom(obj, validateWith);
  if (custom) return custom;
  const schema = load(as ? 'v1' : obj.apiVersion, kind);
  if (!schema) return [`no Kubernetes schema for ${obj.apiVersion} ${obj.kind}`];
  const problems = modelErrors(schema.Model, obj);
  for (const path of unknownFields(schema.validate, obj)) {
    problems.push(`${path}: unknown field (not in the ${kind} schema)`);
  }
  return problems;
}

module.exports = {checkObject};
