#!/usr/bin/env bash
# Builds the real control plane the end-to-end tests run against: kube-apiserver and etcd, static
# (CGO_ENABLED=0), from the Go module in tools/control-plane/, and keeps them in
#   target/control-plane/<kubernetes version>/{kube-apiserver,etcd,stamp}
# Built once per version: when both binaries and a matching stamp are there, it prints one line and
# does nothing. The stamp records the inputs (Go version, go.mod, go.sum, our etcd main, the flags);
# changing any of them rebuilds.
#
# kube-apiserver is stamped with -ldflags -X like a Kubernetes release build, so `kubectl version`
# shows the real version. The Go build cache stays Go's default (~/.cache/go-build): it survives a
# `cargo clean`, and the finished binaries are what target/ keeps.
#
# CONTROL_PLANE_DIR overrides target/control-plane. Needs Go (see go.mod for the minimum) and the
# Go module proxy (GOPROXY) on a cold module cache.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
module="$root/tools/control-plane"
cd "$module"

export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
if ! command -v go >/dev/null 2>&1; then
  echo "error: go is not on PATH; install Go $(go mod edit -json 2>/dev/null | jq -r .Go 2>/dev/null || echo 1.26) or newer to build the control plane" >&2
  exit 1
fi

required() { go mod edit -json | jq -r --arg p "$1" '.Require[] | select(.Path == $p) | .Version'; }
kube_version="$(required k8s.io/kubernetes)"
etcd_version="$(required go.etcd.io/etcd/server/v3)"
[[ "$kube_version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || {
  echo "error: tools/control-plane/go.mod requires k8s.io/kubernetes '$kube_version', not a v1.X.Y release" >&2
  exit 1
}
major="${BASH_REMATCH[1]}"
minor="${BASH_REMATCH[2]}"

out="${CONTROL_PLANE_DIR:-$root/target/control-plane}/$kube_version"
mkdir -p "$out"

# The release time of the module (from the proxy's .info) as the build date: builds are reproducible.
# The proxy does not say which git commit a module version was made from, so gitCommit stays empty.
info="$(go mod download -json "k8s.io/kubernetes@$kube_version" | jq -r .Info)"
build_date="$(jq -r .Time "$info")"
x=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  x+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  x+=" -X $pkg.gitCommit= -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done
ldflags="-s -w$x"

stamp_text="$(
  echo "kube-apiserver $kube_version (k8s.io/kubernetes/cmd/kube-apiserver)"
  echo "etcd $etcd_version (go.etcd.io/etcd/server/v3/etcdmain)"
  echo "$(go version) CGO_ENABLED=0 -trimpath"
  echo "ldflags: $ldflags"
  echo "inputs: $(cat go.mod go.sum etcd/main.go | sha256sum | cut -d' ' -f1)"
)"

# One build at a time per output directory; a second caller waits, then finds the result cached.
exec 9>"$out/.lock"
flock 9
if [[ -x "$out/kube-apiserver" && -x "$out/etcd" && -f "$out/stamp" ]] \
  && [[ "$(cat "$out/stamp")" == "$stamp_text" ]]; then
  echo "control plane $kube_version (etcd $etcd_version) is cached in ${out#"$root"/}"
  exit 0
fi

tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
build() { # name, package
  local start=$SECONDS
  echo "== building $1 ($2) ..."
  go build -trimpath -ldflags "$ldflags" -o "$tmp/$1" "$2"
  echo "   $1 built in $((SECONDS - start))s ($(du -h "$tmp/$1" | cut -f1))"
}
echo "== control plane $kube_version, etcd $etcd_version -> ${out#"$root"/} (Go module download and a cold build take a while)"
go mod download
build etcd ./etcd
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver

# Whole outputs are read (no `grep -q`, no `head`): under pipefail a reader that stops early
# kills the writer with SIGPIPE and fails the pipeline (exit 141).
for bin in etcd kube-apiserver; do
  headers="$(readelf --program-headers "$tmp/$bin")"
  if [[ "$headers" == *'program interpreter'* ]]; then
    echo "error: $bin is dynamically linked although CGO_ENABLED=0; check the Go toolchain's environment" >&2
    exit 1
  fi
done
"$tmp/kube-apiserver" --version
etcd_reported="$("$tmp/etcd" --version)"
echo "${etcd_reported%%$'\n'*}"

rm -f "$out/stamp"
mv -f "$tmp/etcd" "$tmp/kube-apiserver" "$out/"
echo "$stamp_text" >"$out/stamp"
echo "built ${out#"$root"/}/{kube-apiserver,etcd}"
