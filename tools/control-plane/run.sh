#!/usr/bin/env bash
# Runs the real control plane (etcd + kube-apiserver from target/control-plane/<version>/) on
# loopback and writes a kubeconfig for an admin, so a plugin can be tried against a real API
# server. These are the flags the Rust test harness uses; README.md explains each one.
#
# Usage: tools/control-plane/run.sh            start, print the kubeconfig, run until Ctrl-C
#        tools/control-plane/run.sh --smoke    start, run kubectl checks, report timings, stop
# STATE_DIR=dir keeps the state (etcd data, certificates, kubeconfig) there instead of a temp dir.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
smoke=false
[[ "${1:-}" == --smoke ]] && smoke=true

"$root/scripts/build-control-plane.sh" >&2
version="$(cd "$root/tools/control-plane" && go mod edit -json | jq -r '.Require[] | select(.Path == "k8s.io/kubernetes") | .Version')"
bin="${CONTROL_PLANE_DIR:-$root/target/control-plane}/$version"
dir="${STATE_DIR:-$(mktemp -d -t control-plane.XXXXXX)}"
mkdir -p "$dir"

pids=()
# Stops in reverse order of start: kube-apiserver first. With etcd gone first, kube-apiserver's
# graceful shutdown (removing its endpoint lease) retries etcd for minutes. SIGKILL after 10 s.
stop() {
  local i pid
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  [[ -n "${STATE_DIR:-}" ]] || rm -rf "$dir"
}
trap stop EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
millis() { date +%s%3N; }
# Waits (bounded) until the command succeeds; names what it waited for when it gives up.
wait_for() { # what, pid, timeout seconds, command...
  local what=$1 pid=$2 limit=$3 deadline=$(($(date +%s) + $3)); shift 3
  until "$@" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null || (($(date +%s) >= deadline)); then
      echo "error: $what not ready (exited, or waited ${limit}s); the last lines of the logs in $dir follow" >&2
      tail -n 20 "$dir"/*.log >&2
      exit 1
    fi
    sleep 0.1
  done
}

# Credentials: a static token for an admin in system:masters; an ECDSA P-256 key signs
# service-account tokens, its public half (a PUBLIC KEY PEM; a private key is refused) verifies them.
token="$(openssl rand -hex 24)"
echo "$token,admin,admin-uid,system:masters" >"$dir/tokens.csv"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/sa.key" 2>/dev/null
openssl pkey -in "$dir/sa.key" -pubout -out "$dir/sa.pub"

etcd_port=$(free_port) peer_port=$(free_port) api_port=$(free_port)
t0=$(millis)
"$bin/etcd" \
  --name=test --data-dir="$dir/etcd" --unsafe-no-fsync \
  --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
  --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
  --initial-cluster="test=http://127.0.0.1:$peer_port" \
  --log-level=warn >"$dir/etcd.log" 2>&1 &
pids+=($!)
etcd_pid=$!
wait_for etcd "$etcd_pid" 30 curl -fsS "http://127.0.0.1:$etcd_port/health"
t_etcd=$(millis)

"$bin/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$etcd_port" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
  --cert-dir="$dir/certs" \
  --token-auth-file="$dir/tokens.csv" \
  --authorization-mode=Node,RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$dir/sa.pub" \
  --service-account-signing-key-file="$dir/sa.key" \
  --service-cluster-ip-range=10.0.0.0/24 \
  >"$dir/kube-apiserver.log" 2>&1 &
pids+=($!)
api_pid=$!
api="https://127.0.0.1:$api_port"
wait_for "kube-apiserver /readyz" "$api_pid" 120 curl -fsSk -H "Authorization: Bearer $token" "$api/readyz"
t_ready=$(millis)
wait_for "the default namespace" "$api_pid" 60 curl -fsSk -H "Authorization: Bearer $token" "$api/api/v1/namespaces/default"
t_default=$(millis)

# The serving certificate is self-signed by kube-apiserver in --cert-dir; trust it.
cat >"$dir/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: control-plane
  cluster:
    server: $api
    certificate-authority: $dir/certs/apiserver.crt
users:
- name: admin
  user:
    token: $token
contexts:
- name: admin
  context: {cluster: control-plane, user: admin, namespace: default}
current-context: admin
KUBECONFIG

rss() { echo "$(($(ps -o rss= -p "$1") / 1024)) MiB"; }
echo "control plane $version: etcd ready in $((t_etcd - t0)) ms; kube-apiserver /readyz $((t_ready - t_etcd)) ms after etcd, default namespace at $((t_default - t_etcd)) ms"
echo "RSS after start-up: etcd $(rss "$etcd_pid"), kube-apiserver $(rss "$api_pid")"
echo "KUBECONFIG=$dir/kubeconfig"

if $smoke; then
  export KUBECONFIG="$dir/kubeconfig"
  set -x
  kubectl version
  kubectl version -o json | python3 -c 'import json, sys; print(json.load(sys.stdin)["serverVersion"])'
  kubectl get ns
  kubectl create configmap smoke --from-literal=key=value
  kubectl get configmap smoke -o jsonpath='{.metadata.generation}{"|"}{.data.key}{"\n"}'
  # No kube-controller-manager: nothing creates the `default` ServiceAccount; create it.
  kubectl create serviceaccount default
  kubectl create token default | python3 -c 'import base64, sys; p = sys.stdin.read().split(".")[1]; print(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)).decode())'
  # The issued token authenticates (the public key verifies it); RBAC grants it nothing by default.
  sa_token="$(kubectl create token default)"
  kubectl --token="$sa_token" auth whoami
  if kubectl --token="$sa_token" get configmaps; then echo "error: RBAC let a bare service account list ConfigMaps" >&2; exit 1; fi
  set +x
  echo "RSS after the checks: etcd $(rss "$etcd_pid"), kube-apiserver $(rss "$api_pid")"
  t_stop=$(millis)
  stop
  trap - EXIT
  echo "stopped both in $(($(millis) - t_stop)) ms"
else
  echo "running; Ctrl-C stops both"
  wait -n "${pids[@]}"
fi
