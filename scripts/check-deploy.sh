#!/usr/bin/env bash
# Checks the Kubernetes manifests with what works without a cluster (this
# machine has none; see docs/deploy.md):
#   - yamllint on every YAML file (deploy/yamllint.yaml);
#   - `kubectl kustomize` builds the base (every resource parses, the patches apply);
#   - kubectl decodes each workload into its typed Go object (`set image
#     --local`): a wrong type is an error, and a misspelt field is dropped by
#     the decoding, so every field of the manifest must come back out;
#   - every Localhost seccomp profile a pod names is in deploy/seccomp/ and
#     parses (tests/deploy.rs runs the agent under it).
# What it cannot check: anything the API server or admission decides
# (quotas, policies, whether the image exists). Prints one line per failure.
#   bash scripts/check-deploy.sh [K8S_DIR]     (default deploy/k8s)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-deploy/k8s}"
yamllint -s -c deploy/yamllint.yaml "$dir"
built=$(mktemp)
decoded=$(mktemp)
trap 'rm -f "$built" "$decoded"' EXIT
kubectl kustomize "$dir" > "$built"
# Only workloads (objects with a pod template) are decoded by set image; the
# others (Namespace, ConfigMap, PVC) are reported and skipped, hence `|| true`
# and the check below that every workload came back.
kubectl set image --local -f "$built" '*=headroom-check' -o json 2>&1 > "$decoded" \
  | grep -v -e 'does not have a pod template' -e '^$' >&2 || true
python3 - "$built" "$decoded" "deploy/seccomp" <<'PY'
import json, os, sys, yaml

built = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
text = open(sys.argv[2]).read()
decoded, at, dec = [], 0, json.JSONDecoder()
while at < len(text):
    if text[at].isspace():
        at += 1
        continue
    obj, at = dec.raw_decode(text, at)
    decoded.append(obj)
by_key = {(o["kind"], o["metadata"]["name"]): o for o in decoded}

def missing(src, out, path):
    """Paths of src that the typed decoding dropped (unknown fields)."""
    if isinstance(src, dict):
        if not isinstance(out, dict):
            return [path]
        return [m for k, v in src.items() for m in (missing(v, out[k], f"{path}.{k}") if k in out else [f"{path}.{k}"])]
    if isinstance(src, list):
        if not isinstance(out, list) or len(out) != len(src):
            return [path]
        return [m for i, (a, b) in enumerate(zip(src, out)) for m in missing(a, b, f"{path}[{i}]")]
    return []

failed = False
def profiles(v):
    """localhostProfile names anywhere under v."""
    if isinstance(v, dict):
        if v.get("type") == "Localhost":
            yield v.get("localhostProfile", "")
        for x in v.values():
            yield from profiles(x)
    elif isinstance(v, list):
        for x in v:
            yield from profiles(x)

for obj in built:
    for name in profiles(obj):
        path = os.path.join(sys.argv[3], os.path.basename(name))
        try:
            json.load(open(path))["defaultAction"]
        except (OSError, ValueError, KeyError) as e:
            print(f"check-deploy: seccomp profile {name} of {obj['kind']}/{obj['metadata']['name']}: {e}", file=sys.stderr)
            failed = True
for obj in built:
    kind, name = obj["kind"], obj["metadata"]["name"]
    if kind not in ("DaemonSet", "Deployment", "StatefulSet", "Job", "CronJob", "Pod"):
        continue
    out = by_key.get((kind, name))
    if out is None:
        print(f"check-deploy: {kind}/{name} does not decode as a {kind}", file=sys.stderr)
        failed = True
        continue
    # The image is what set image changed.
    for m in missing(obj, out, f"{kind}/{name}"):
        if not m.endswith(".image"):
            print(f"check-deploy: {m} is not a field of {kind} (misspelt?)", file=sys.stderr)
            failed = True
sys.exit(1 if failed else 0)
PY
echo "check-deploy: $dir passes yamllint, kustomize and kubectl's typed decoding"
