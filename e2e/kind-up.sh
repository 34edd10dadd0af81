#!/usr/bin/env bash
# Bring up a kind cluster with the Swivel image and the chart, for the e2e suite and demos.
#
#   e2e/kind-up.sh                 # cluster "swivel", image built, loaded, chart installed
#   e2e/kind-up.sh --no-install    # cluster and image only (the e2e suite installs its own release)
#   e2e/kind-up.sh --down          # delete the cluster
#
# Needs docker, kind and kubectl on PATH; helm is optional (without it the chart is installed
# through helm-python-sdk from .venv). Writes the kubeconfig to $KUBECONFIG_OUT and prints
# the command that runs the e2e suite against it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLUSTER="${SWIVEL_KIND_CLUSTER:-swivel}"
# The tag StreamJobs use by default (swivel/api/streamjob.py DEFAULT_IMAGE): driver and
# executor pods find it already loaded on the nodes, no registry needed.
IMAGE="${SWIVEL_IMAGE:-ghcr.io/swivel-dev/swivel:$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$ROOT/charts/swivel/Chart.yaml")}"
KUBECONFIG_OUT="${KUBECONFIG_OUT:-${TMPDIR:-/tmp}/swivel-kind-${CLUSTER}.kubeconfig}"
NAMESPACE="${SWIVEL_NAMESPACE:-swivel-system}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"

need() { command -v "$1" >/dev/null || { echo "kind-up: $1 is not on PATH" >&2; exit 2; }; }

if [[ "${1:-}" == "--down" ]]; then
  need kind
  kind delete cluster --name "$CLUSTER"
  rm -f "$KUBECONFIG_OUT"
  exit 0
fi

need docker
need kind
need kubectl

if ! kind get clusters | grep -qx "$CLUSTER"; then
  kind create cluster --name "$CLUSTER" --wait 120s
fi
kind get kubeconfig --name "$CLUSTER" >"$KUBECONFIG_OUT"
export KUBECONFIG="$KUBECONFIG_OUT"

docker build --tag "$IMAGE" "$ROOT"
kind load docker-image "$IMAGE" --name "$CLUSTER"

if [[ "${1:-}" != "--no-install" ]]; then
  repository="${IMAGE%:*}"
  tag="${IMAGE##*:}"
  # Watch `default` only, so the e2e suite's own release (other namespaces) never competes.
  if command -v helm >/dev/null; then
    helm upgrade --install swivel "$ROOT/charts/swivel" --namespace "$NAMESPACE" \
      --create-namespace --wait --timeout 5m \
      --set image.repository="$repository" --set image.tag="$tag" \
      --set image.pullPolicy=IfNotPresent --set 'watch.namespaces={default}'
  else
    "$PYTHON" - "$ROOT/charts/swivel" "$NAMESPACE" "$repository" "$tag" <<'PY'
import sys

import helm_python as helm

chart, namespace, repository, tag = sys.argv[1:]
values = {
    "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
    "watch": {"namespaces": ["default"]},
}
with helm.Config(namespace=namespace) as config:
    try:
        config.status("swivel")
        config.upgrade(chart, "swivel", values, namespace=namespace, wait="watcher", timeout=300)
    except helm.HelmNotFoundError:
        config.install(
            chart, "swivel", values, namespace=namespace, create_namespace=True,
            wait="watcher", timeout=300,
        )
print(f"release swivel installed in {namespace}")
PY
  fi
  kubectl --namespace "$NAMESPACE" rollout status deployment/swivel --timeout=5m
fi

cat <<MSG
kind cluster "$CLUSTER" is up with $IMAGE.
  export KUBECONFIG=$KUBECONFIG_OUT
  kubectl apply -f examples/fraud-detection/streamjob.yaml
Run the e2e suite (it installs its own release in namespaces of its own):
  SWIVEL_E2E_KUBECONFIG=$KUBECONFIG_OUT SWIVEL_E2E_IMAGE=$IMAGE .venv/bin/pytest e2e -q
MSG
