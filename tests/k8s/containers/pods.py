#!/usr/bin/python3
"""Turns the chart's rendered objects into Pods that `podman kube play` runs on one machine.

  pods.py RENDERED SECRETS LAYOUT OUTDIR [EXAMPLE]

RENDERED: `helm template` output. SECRETS: the Secret objects the test made (the chart only names
them). LAYOUT: JSON {"work": DIR, "ips": {ROLE: IP}}, ROLE one of the keys of OUTDIR below.
EXAMPLE: the plain training Pod of examples/kubernetes (it checks every byte itself).
Writes OUTDIR/<role>.yaml for the roles master, worker-a, worker-b, holder, fuse, load and train (each
with the ConfigMaps) and OUTDIR/pods.env (shell assignments: pod and container names, grace
periods, probe commands).

Where one machine and podman 4.3 force a change, `substitute` applies it, and only these, each
printed when applied (tests/k8s/containers/README.md lists them):
  name       a DaemonSet/StatefulSet/Job template becomes a Pod named after its workload and node
  hostPath   every hostPath folder P of a pod on node N becomes WORK/node-N/P (the node's
             root); devices (/dev/fuse) stay
  podIP      env POD_IP from fieldRef status.podIP (unsupported by kube play) becomes the static
             IP the pod is given with --ip
  hosts      hostAliases: the master Service's name -> the master pod's IP (no cluster DNS)
  secret     a Secret volume becomes a hostPath of files made from the Secret object, with its
             items, modes and fsGroup (kube play 4.3 writes Secret volumes base64-encoded and
             ignores items and modes)
  annotation an annotation value over 63 characters (the chart's checksum/config, which only
             rolls pods on a config change) is dropped: kube play 4.3 checks annotations as labels
  configmap  a ConfigMap key mounted with subPath becomes a hostPath file of that key (kube play
             4.3 ignores subPath on ConfigMap volumes)
  ports      containerPort lists are dropped: kube play 4.3 publishes each on the host's
             0.0.0.0 (in Kubernetes they only name ports); pods reach each other on the network
  emptyDir   an emptyDir volume gets its pod's name before its own: kube play 4.3 makes one
             podman volume per emptyDir name, shared by every pod that uses the name
  init       pods with init containers get podman's annotation that keeps them after they ran
             (io.podman.annotations.init.container.type: always): podman 4.3 may fail the play
             removing a "once" init container it still sees running
Nothing else of the rendered specs is changed.
"""
import base64
import copy
import json
import os
import shlex
import sys

import yaml

ROLES = ("master", "worker", "holder", "mount", "load")
FOLDER_TYPES = ("", "Directory", "DirectoryOrCreate")  # hostPaths that move; devices stay


def log(what, detail):
    print(f"substitution {what}: {detail}", flush=True)


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def role_of(template):
    """The lakecache command a pod template runs: its first container's first known argument."""
    c = template["spec"]["containers"][0]
    for arg in list(c.get("command", [])) + list(c.get("args", [])):
        if arg in ROLES:
            return arg
    return None


def master_service(objects, master_labels):
    for o in objects:
        if o["kind"] != "Service":
            continue
        selector = o["spec"].get("selector", {})
        if selector and all(master_labels.get(k) == v for k, v in selector.items()):
            return o["metadata"]["name"]
    sys.exit("pods.py: no Service selects the master's pods")


def write_secret_files(secret, source, target, uid, gid, pod):
    """Files of `secret` as a Secret volume `source` shows them, under `target`."""
    data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
    data.update({k: v.encode() for k, v in (secret.get("stringData") or {}).items()})
    default_mode = source.get("defaultMode", 0o644)
    items = source.get("items") or [{"key": k, "path": k} for k in sorted(data)]
    os.makedirs(target, mode=0o755, exist_ok=True)
    for item in items:
        if item["key"] not in data:
            sys.exit(f"pods.py: {pod}: Secret {secret['metadata']['name']} has no key {item['key']}")
        path = os.path.join(target, item["path"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data[item["key"]])
        mode = item.get("mode", default_mode)
        if gid is not None:
            mode |= (mode & 0o700) >> 3 & 0o440  # kubelet: fsGroup may read what the owner may
        os.chown(path, uid or 0, gid if gid is not None else 0)
        os.chmod(path, mode)


def configmap_subpaths(pod, configmaps, work):
    """A ConfigMap key mounted with subPath becomes a hostPath file (kube play 4.3 mounts the whole
    ConfigMap there, a folder, whatever subPath says)."""
    name, spec = pod["metadata"]["name"], pod["spec"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for c in spec.get("initContainers", []) + spec["containers"]:
        for m in c.get("volumeMounts", []):
            source = volumes[m["name"]].get("configMap")
            if source is None or "subPath" not in m:
                continue
            key = m.pop("subPath")
            path = f"{work}/configmaps/{name}/{source['name']}/{key}"
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(configmaps[source["name"]]["data"][key])
            os.chmod(path, 0o644)
            volume = f"{m['name']}-{key.replace('.', '-').replace('_', '-')}"
            if volume not in volumes:
                volumes[volume] = {"name": volume, "hostPath": {"path": path, "type": "File"}}
                spec["volumes"].append(volumes[volume])
            m["name"] = volume
            log("configmap", f"{name}/{c['name']}: {m['mountPath']} (subPath {key}) -> file {path}")


def pod_own_empty_dirs(pod):
    """emptyDir volumes named after their pod (kube play 4.3 makes one podman volume per emptyDir
    name, which every pod using that name would share)."""
    name, spec = pod["metadata"]["name"], pod["spec"]
    renamed = {}
    for v in spec.get("volumes", []):
        if "emptyDir" in v:
            renamed[v["name"]] = v["name"] = f"{name}-{v['name']}"
            log("emptyDir", f"{name}: volume {v['name']}")
    for c in spec.get("initContainers", []) + spec["containers"]:
        for m in c.get("volumeMounts", []):
            m["name"] = renamed.get(m["name"], m["name"])


def substitute(pod, node, layout, secrets, configmaps, master_host):
    """The listed changes that let a rendered pod run on this machine (see the module doc)."""
    name, spec, work = pod["metadata"]["name"], pod["spec"], layout["work"]
    # Who reads the Secret files: the pod's user and fsGroup, else its first container's user.
    sc = dict(spec["containers"][0].get("securityContext", {}), **spec.get("securityContext", {}))
    for v in spec.get("volumes", []):
        if "hostPath" in v and v["hostPath"].get("type", "") in FOLDER_TYPES:
            old = v["hostPath"]["path"]
            v["hostPath"]["path"] = f"{work}/node-{node}{old}"
            log("hostPath", f"{name}: {v['name']}: {old} -> {v['hostPath']['path']}")
        elif "secret" in v:
            source = v.pop("secret")
            secret = secrets.get(source["secretName"])
            if secret is None:
                sys.exit(f"pods.py: {name}: no Secret {source['secretName']} was made")
            target = f"{work}/secrets/{name}/{v['name']}"
            write_secret_files(secret, source, target, sc.get("runAsUser"), sc.get("fsGroup"), name)
            v["hostPath"] = {"path": target, "type": "Directory"}
            log("secret", f"{name}: {v['name']}: Secret {source['secretName']} -> files in {target}")
    configmap_subpaths(pod, configmaps, work)
    pod_own_empty_dirs(pod)
    ip = layout["ips"][name]
    for c in spec.get("initContainers", []) + spec["containers"]:
        if c.pop("ports", None):
            log("ports", f"{name}/{c['name']}: ports dropped (kube play 4.3 publishes them on the host)")
        for e in c.get("env", []):
            field = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            if field == "status.podIP":
                e.pop("valueFrom")
                e["value"] = ip
                log("podIP", f"{name}/{c['name']}: {e['name']} = {ip}")
    args = [a for c in spec["containers"] for a in c.get("args", [])]
    if any(a.split(":")[0] == master_host for a in args):
        spec.setdefault("hostAliases", []).append(
            {"ip": layout["ips"]["master"], "hostnames": [master_host]})
        log("hosts", f"{name}: {master_host} -> {layout['ips']['master']}")


def as_pod(workload, name, role):
    template = copy.deepcopy(workload["spec"]["template"])
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": dict(template.get("metadata", {}), name=name), "spec": template["spec"]}
    log("name", f"{workload['kind']} {workload['metadata']['name']} -> Pod {name} ({role})")
    annotations = pod["metadata"].get("annotations", {})
    for key in [k for k, v in annotations.items() if len(str(v)) > 63]:
        del annotations[key]
        log("annotation", f"{name}: {key} dropped (kube play 4.3 limits annotation values to 63)")
    if template["spec"].get("initContainers"):
        annotations["io.podman.annotations.init.container.type"] = "always"
        log("init", f"{name}: init containers kept after they ran (podman 4.3 races removing them)")
    pod["metadata"]["annotations"] = annotations
    return pod


def probe_command(container, kind):
    probe = container.get(kind) or {}
    return shlex.join(probe["exec"]["command"]) if "exec" in probe else ""


def main(rendered_path, secrets_path, layout_path, outdir, example_path=None):
    objects = load_all(rendered_path)
    secrets = {s["metadata"]["name"]: s for s in load_all(secrets_path) if s["kind"] == "Secret"}
    with open(layout_path) as f:
        layout = json.load(f)
    configmaps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
    workloads = {}
    for o in objects:
        if o["kind"] in ("StatefulSet", "DaemonSet", "Job"):
            workloads[role_of(o["spec"]["template"])] = o
    missing = [r for r in ROLES if r not in workloads]
    if missing:
        sys.exit(f"pods.py: the rendered chart has no workload running {', '.join(missing)}")
    master_host = master_service(objects, workloads["master"]["spec"]["template"]["metadata"]
                                 .get("labels", {}))
    placements = [("master", "master", f"{workloads['master']['metadata']['name']}-0", "a"),
                  ("worker-a", "worker", f"{workloads['worker']['metadata']['name']}-node-a", "a"),
                  ("worker-b", "worker", f"{workloads['worker']['metadata']['name']}-node-b", "b"),
                  ("holder", "holder", f"{workloads['holder']['metadata']['name']}-node-a", "a"),
                  ("fuse", "mount", f"{workloads['mount']['metadata']['name']}-node-a", "a"),
                  ("load", "load", f"{workloads['load']['metadata']['name']}-run", "a")]
    env = {"MASTER_HOST": master_host}
    for key, role, name, node in placements:
        layout["ips"][name] = layout["ips"][key]
        pod = as_pod(workloads[role], name, role)
        substitute(pod, node, layout, secrets, configmaps, master_host)
        write(outdir, key, list(configmaps.values()) + [pod])
        c = pod["spec"]["containers"][0]
        var = key.replace("-", "_").upper()
        env.update({f"POD_{var}": name, f"CTR_{var}": f"{name}-{c['name']}",
                    f"GRACE_{var}": str(pod["spec"].get("terminationGracePeriodSeconds", 30)),
                    f"READY_{var}": probe_command(c, "readinessProbe"),
                    f"LIVE_{var}": probe_command(c, "livenessProbe")})
    if example_path:
        pod = copy.deepcopy(load_all(example_path)[0])
        layout["ips"][pod["metadata"]["name"]] = layout["ips"]["train"]
        substitute(pod, "a", layout, secrets, configmaps, master_host)
        write(outdir, "train", [pod])
        env.update({"POD_TRAIN": pod["metadata"]["name"],
                    "CTR_TRAIN": f"{pod['metadata']['name']}-{pod['spec']['containers'][0]['name']}"})
    with open(os.path.join(outdir, "pods.env"), "w") as f:
        f.writelines(f"{k}={shlex.quote(v)}\n" for k, v in env.items())


def write(outdir, key, docs):
    with open(os.path.join(outdir, f"{key}.yaml"), "w") as f:
        yaml.safe_dump_all(docs, f, sort_keys=False)


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    main(*sys.argv[1:])
