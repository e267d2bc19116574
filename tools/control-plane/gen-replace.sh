#!/usr/bin/env bash
# Generates the `replace` lines of tools/control-plane/go.mod from the go.mod of k8s.io/kubernetes
# as the Go module proxy serves it.
#
# k8s.io/kubernetes requires its staging modules (k8s.io/api, k8s.io/client-go, ...) at v0.0.0 and
# points them at ./staging/src/... with `replace` lines that only work inside its own repository.
# A module that requires k8s.io/kubernetes must replace each of them with its published version:
# Kubernetes v1.X.Y publishes its staging modules as v0.X.Y. This script reads the list of staging
# modules from the upstream go.mod (never a hand-written list), drops every k8s.io/* replace in our
# go.mod and writes one per staging module. It also prints the etcd server version Kubernetes pins.
#
# Usage: tools/control-plane/gen-replace.sh [KUBERNETES_VERSION]   (default: the version required
#        in tools/control-plane/go.mod). Run `go mod tidy` afterwards.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

version="${1:-$(go mod edit -json | jq -r '.Require[] | select(.Path == "k8s.io/kubernetes") | .Version')}"
if [[ ! "$version" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]]; then
  echo "gen-replace.sh: Kubernetes version '$version' is not of the form v1.X.Y; pass one, e.g. v1.36.3" >&2
  exit 2
fi
staging_version="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"

# The go.mod exactly as the proxy serves it (GOFLAGS=-mod=mod: this module's own state is irrelevant).
upstream_mod="$(cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" | jq -r '.GoMod')"
if [[ ! -s "$upstream_mod" ]]; then
  echo "gen-replace.sh: the Go module proxy served no go.mod for k8s.io/kubernetes@$version; check GOPROXY and the version" >&2
  exit 1
fi

# Staging modules: replaced upstream by a local ./staging/ directory.
mapfile -t staging < <(go mod edit -json "$upstream_mod" \
  | jq -r '.Replace[]? | select(.New.Path | startswith("./staging/")) | .Old.Path' | sort -u)
if [[ ${#staging[@]} -eq 0 ]]; then
  echo "gen-replace.sh: found no ./staging/ replace lines in $upstream_mod; the layout of k8s.io/kubernetes changed, update this script" >&2
  exit 1
fi

# Drop the k8s.io/* replaces we wrote before, then write the new set.
edits=()
while read -r old; do
  [[ -n "$old" ]] && edits+=("-dropreplace=$old")
done < <(go mod edit -json | jq -r '.Replace[]? | select(.Old.Path | startswith("k8s.io/")) | .Old.Path')
for module in "${staging[@]}"; do
  edits+=("-replace=$module=$module@$staging_version")
done
go mod edit "${edits[@]}"

etcd="$(go mod edit -json "$upstream_mod" | jq -r '.Require[] | select(.Path == "go.etcd.io/etcd/server/v3") | .Version')"
echo "gen-replace.sh: k8s.io/kubernetes $version: ${#staging[@]} staging modules replaced with $staging_version; it pins go.etcd.io/etcd/server/v3 $etcd"
