// node check.js [--lake-path DIR] [--training] FILE...: every object of the YAML files against the
// Kubernetes schemas (schema_check.js; crd_schemas.js for the ServiceMonitor) and the lakecache
// spec lint (spec_lint.js), then the objects of each file together (what its ServiceMonitors
// reach). Prints one line per object and one per problem; exits 1 when there is any problem.
'use strict';

const fs = require('fs');
const YAML = require('yaml');
const {checkObject} = require('./schema_check.js');
const {lintObject, lintObjects, podSpecs} = require('./spec_lint.js');

// The Kubeflow CRDs' schemas are not at hand: their pod templates get the core schema.
const KUBEFLOW = {PyTorchJob: 'kubeflow.org/v1', MPIJob: 'kubeflow.org/v2beta1'};

function checkKubeflow(obj) {
  const problems = [];
  if (obj.apiVersion !== KUBEFLOW[obj.kind]) {
    problems.push(`/apiVersion: ${obj.kind} is ${KUBEFLOW[obj.kind]}, not ${obj.apiVersion}`);
  }
  const specs = podSpecs(obj);
  if (specs.length === 0) problems.push('/spec: no replica specs with pod templates');
  for (const {where} of specs) {
    const templatePath = where.replace(/\/spec$/, '');
    const template = templatePath.split('/').slice(1).reduce((o, k) => o[k], obj);
    for (const p of checkObject(template, 'PodTemplateSpec')) problems.push(`${templatePath}${p}`);
  }
  return problems;
}

function main(argv) {
  const opts = {lakePath: '/mnt/lake', training: false};
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--lake-path') opts.lakePath = argv[++i];
    else if (argv[i] === '--training') opts.training = true;
    else files.push(argv[i]);
  }
  let failed = 0;
  for (const file of files) {
    const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'));
    const objs = [];
    for (const doc of docs) {
      if (doc.errors.length) {
        console.log(`${file}: YAML: ${doc.errors[0].message}`);
        failed++;
        continue;
      }
      const obj = doc.toJS();
      if (!obj) continue;
      objs.push(obj);
      const name = `${obj.kind}/${(obj.metadata || {}).name}`;
      const kubeflow = obj.kind in KUBEFLOW;
      const problems = [...(kubeflow ? checkKubeflow(obj) : checkObject(obj)), ...lintObject(obj, opts)];
      let how = 'Kubernetes 1.27 schema';
      if (kubeflow) how = 'pod templates against the core PodTemplateSpec schema (no Kubeflow CRD schema at hand)';
      else if (obj.kind === 'ServiceMonitor') how = 'Prometheus Operator CRD schema';
      console.log(`${problems.length ? 'FAIL' : 'ok  '} ${file}: ${name}: ${how}, unknown fields, spec lint`);
      for (const p of problems) console.log(`     ${file}: ${name}: ${p}`);
      failed += problems.length;
    }
    const across = lintObjects(objs);
    if (objs.some((o) => o.kind === 'ServiceMonitor') || across.length) {
      console.log(`${across.length ? 'FAIL' : 'ok  '} ${file}: ServiceMonitors, Services and the pods they reach`);
    }
    for (const {name, problem} of across) console.log(`     ${file}: ${name}: ${problem}`);
    failed += across.length;
  }
  return failed ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
