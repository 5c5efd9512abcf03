#!/usr/bin/env python3
"""deploy_k8s: the Kubernetes manifests of deploy/k8s, checked without a cluster (none can
be reached here; kubectl's dry run needs an API server). Each document has apiVersion, kind
and a name; the Deployment's selector matches its pods and the Service selects them and
targets the port meridiand listens on; every mounted volume exists and the PVC and Secret
they name are the ones defined or documented; the training pod sends to that Service's
name and port with the same run id and secret, and its agent variables are exactly those
`meridian doctor -- torchrun ...` says a torchrun job's ranks receive (LD_PRELOAD aside: no
MPI in a torch pod), pointing into the volume the init container fills from the image's
/usr/lib/meridian. Last, meridiand runs with the Deployment's own arguments (paths moved
into a temporary folder, loopback instead of 0.0.0.0) until it listens, then stops on
SIGTERM with status 0.
usage: k8s_check.py DEPLOY_K8S_DIR MERIDIAN MERIDIAND"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed (deploy/install-deps.sh installs it)")
    sys.exit(77)

k8s_dir, meridian, meridiand = sys.argv[1:4]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


docs = {}
for name in sorted(os.listdir(k8s_dir)):
    if name.endswith(".yaml"):
        with open(os.path.join(k8s_dir, name)) as f:
            for d in yaml.safe_load_all(f):
                if d is None:
                    continue
                check(all(k in d for k in ("apiVersion", "kind", "metadata"))
                      and d["metadata"].get("name"), f"{name}: {d.get('kind')} has apiVersion, "
                      "kind and a name")
                docs[(d["kind"], d["metadata"]["name"])] = d

dep = docs[("Deployment", "meridian-aggregator")]
svc = docs[("Service", "meridian-aggregator")]
job = docs[("Job", "train-profiled")]
pod = dep["spec"]["template"]
labels = pod["metadata"]["labels"]
sel = dep["spec"]["selector"]["matchLabels"]
check(all(labels.get(k) == v for k, v in sel.items()), "Deployment selector matches its pods")
check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()),
      "Service selects the aggregator pods")
check(dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate",
      "one meridiand per database, never two at once (replicas 1, Recreate)")
ctr = pod["spec"]["containers"][0]
ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
sport = svc["spec"]["ports"][0]
check(sport["targetPort"] in ports, "Service targetPort names a container port")
args = ctr["args"]
listen = args[args.index("--listen") + 1]
check(listen.endswith(":%d" % ports[sport["targetPort"]]), "meridiand listens on that port")


def volumes_ok(spec, what):
    vols = {v["name"]: v for v in spec["volumes"]}
    for c in spec.get("initContainers", []) + spec["containers"]:
        for m in c.get("volumeMounts", []):
            check(m["name"] in vols, f"{what}: volume {m['name']} of {c['name']} exists")
    return vols


vols = volumes_ok(pod["spec"], "aggregator")
check(("PersistentVolumeClaim", vols["db"]["persistentVolumeClaim"]["claimName"]) in docs,
      "the database's PVC is defined")
secret_name = vols["secret"]["secret"]["secretName"]
mounts = {m["name"]: m["mountPath"] for m in ctr["volumeMounts"]}
secret_arg = args[args.index("--secret-file") + 1]
check(secret_arg.startswith(mounts["secret"] + "/"), "--secret-file is in the secret's mount")
run_env = {e["name"]: e.get("value") for e in ctr.get("env", [])}

tspec = job["spec"]["template"]["spec"]
tvols = volumes_ok(tspec, "training")
train = tspec["containers"][0]
tenv = {e["name"]: e["value"] for e in train["env"]}
tmounts = {m["name"]: m["mountPath"] for m in train["volumeMounts"]}
check(tvols["meridian-secret"]["secret"]["secretName"] == secret_name,
      "training pod mounts the aggregator's secret (%s)" % secret_name)
check(tenv["MERIDIAN_AGGREGATOR"] == "%s:%d" % (svc["metadata"]["name"], sport["port"]),
      "MERIDIAN_AGGREGATOR is the Service's name and port")
check(tenv["MERIDIAN_RUN_ID"] == run_env["RUN_ID"], "same run id on both sides")
check(tenv["MERIDIAN_SECRET_FILE"] == tmounts["meridian-secret"] + "/" +
      os.path.basename(secret_arg), "MERIDIAN_SECRET_FILE is the mounted secret")
agent_dir = tmounts["meridian-agent"]
init = tspec["initContainers"][0]
check(init["image"] == ctr["image"], "the agent comes from the aggregator's image")
check("/usr/lib/meridian/" in " ".join(init["command"]) and
      {m["mountPath"] for m in init["volumeMounts"]} == {agent_dir},
      "the init container copies /usr/lib/meridian into the agent volume")
for v in ("CUDA_INJECTION64_PATH", "NCCL_PROFILER_PLUGIN", "NVTX_INJECTION64_PATH"):
    check(tenv.get(v) == agent_dir + "/libmeridian.so", f"{v} is the copied agent")

out = subprocess.run([meridian, "doctor", "--", "torchrun", "--nproc_per_node=8", "train.py"],
                     capture_output=True, text=True).stdout
m = re.search(r"ranks will receive: (.*)", out)
want = set(m.group(1).split()) if m else set()
want = {v for v in want if not v.startswith("MERIDIAN_") or v in
        ("MERIDIAN_AGGREGATOR", "MERIDIAN_RUN_ID", "MERIDIAN_SECRET_FILE")}
check(want and want == set(tenv), "the pod's variables are the launcher's: %s" %
      " ".join(sorted(want)))

# meridiand with the Deployment's arguments
with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(tmp + "/db")
    os.makedirs(tmp + "/secret")
    with open(tmp + "/secret/secret", "w") as f:
        f.write("s3cret-for-the-check\n")
    a = [x.replace("$(RUN_ID)", run_env["RUN_ID"]) for x in args]
    a = [x.replace(mounts["db"], tmp + "/db").replace(mounts["secret"], tmp + "/secret")
         for x in a]
    a[a.index("--listen") + 1] = "127.0.0.1:0"
    p = subprocess.Popen([meridiand] + a + ["--port-file", tmp + "/port"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 15
    while not os.path.exists(tmp + "/port") and p.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    up = os.path.exists(tmp + "/port")
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = -9
    log = p.stdout.read()
    check(up and rc == 0 and os.path.exists(tmp + "/db/%s.db" % run_env["RUN_ID"]),
          "meridiand runs with the Deployment's arguments, listens, stops on SIGTERM (%d)" % rc)
    if not up or rc:
        print(log)

print("deploy_k8s: %d failed" % len(failures))
sys.exit(1 if failures else 0)
