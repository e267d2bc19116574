#!/usr/bin/env bash
# Builds a reconciler written in Go into a WebAssembly component:
#
#   build-component.sh <name> <package-dir>   ->  ${CARGO_TARGET_DIR:-<repo>/target}/guests/<name>.wasm
#
# <package-dir> holds a Go package that calls guest.Register in an init function (its module's
# go.mod requires reconcile-host/guest, replaced by guest-sdk/go). The steps (docs/guests/go.md):
#
# 1. Go 1.26.8: the `go` on PATH when it is that version, else the toolchain module
#    golang.org/toolchain from the Go module proxy, unpacked into <repo>/.toolchains/go/.
# 2. wit-c (tools/wit-c, the workspace's guest build tool), built by cargo into target/debug/:
#    the Go generator of wit-bindgen 0.63.0 (the version of the Rust guest SDK's wit-bindgen) and
#    wasmtime 48.0.8's preview1 reactor adapter.
# 3. The bindings' Go runtime package go.bytecodealliance.org/pkg, from the sources of the
#    wit-bindgen-go crate (the Go module proxy does not serve the version it names), with
#    component/cabi-realloc-keep.patch applied (cabi_realloc keeps its blocks alive without
#    runtime.Pinner): `wit-c go-runtime`, into target/guests/go/runtime/.
# 4. `wit-c go-bindings` generates the bindings of wit/ (a `main` package, module wit_component);
#    guest-sdk/go/component/glue.go joins them to the SDK and the reconciler's package; a
#    go.work ties the modules together, nothing is written to the source tree.
# 5. GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared (a reactor: `_initialize`, the
#    `//go:wasmexport` functions), then `wit-c component --wit wit/` embeds the world's type and
#    adapts the WASI preview1 imports.
#
# Idempotent: installs only what is missing. Go's build cache makes a rebuild with no change fast.
set -euo pipefail

if [ "$#" -ne 2 ]; then
  echo "usage: $0 <name> <package-dir>" >&2
  exit 2
fi
name=$1
package=$(cd "$2" && pwd)

sdk=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$sdk/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
case $target in /*) ;; *) target=$PWD/$target ;; esac  # relative to the cwd, as for cargo
build=$target/guests/go/$name
out=$target/guests/$name.wasm
toolchains=$repo/.toolchains/go

GO_VERSION=1.26.8

# 1. Go.
go=$(command -v go || true)
if [ -z "$go" ] || [ "$("$go" env GOVERSION)" != "go$GO_VERSION" ]; then
  go=$toolchains/go$GO_VERSION/bin/go
  if [ ! -x "$go" ]; then
    arch=$(uname -m); case $arch in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
    proxy=${GOPROXY:-https://proxy.golang.org}; proxy=${proxy%%,*}
    zip=$toolchains/go$GO_VERSION.zip
    echo "== installing Go $GO_VERSION (golang.org/toolchain from $proxy)"
    mkdir -p "$toolchains"
    curl -fsSL -o "$zip" "$proxy/golang.org/toolchain/@v/v0.0.1-go$GO_VERSION.linux-$arch.zip"
    rm -rf "$toolchains/unpack" && mkdir "$toolchains/unpack"
    (cd "$toolchains/unpack" && unzip -q "$zip")
    mv "$toolchains/unpack/golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-$arch" \
      "$toolchains/go$GO_VERSION"
    rm -rf "$toolchains/unpack" "$zip"
  fi
fi
export GOTOOLCHAIN=local

# 2. wit-c.
wit_c=$("$repo/tools/wit-c/built.sh" "$target")

# 3. The bindings' Go runtime package, with the SDK's patch applied
# (component/cabi-realloc-keep.patch); rewritten only where it changed.
runtime=$target/guests/go/runtime
"$wit_c" go-runtime "$runtime"

# 4. Bindings, glue and workspace.
mkdir -p "$build"
rm -rf "$build/bindings.tmp"
"$wit_c" go-bindings "$repo/wit" "$build/bindings.tmp"
module=$(cd "$package" && "$go" list -m)
import=$(cd "$package" && "$go" list .)
mkdir -p "$build/bindings.tmp/export_wit_world"
sed "s|RECONCILER_PACKAGE|$import|" "$sdk/component/glue.go" \
  > "$build/bindings.tmp/export_wit_world/glue.go"
mkdir -p "$build/argv0"
printf 'module argv0\n\ngo %s\n' "${GO_VERSION%.*}" > "$build/argv0/go.mod"
cp "$sdk/component/argv0.go" "$build/argv0/argv0.go"
if ! diff -rq "$build/bindings.tmp" "$build/bindings" >/dev/null 2>&1; then
  rm -rf "$build/bindings" && mv "$build/bindings.tmp" "$build/bindings"
else
  rm -rf "$build/bindings.tmp"
fi
cat > "$build/go.work" <<WORK
go ${GO_VERSION%.*}

use (
	./bindings
	./argv0
	$sdk
	$(cd "$package" && dirname "$("$go" env GOMOD)")
)

// The runtime package the bindings import, from the wit-bindgen-go crate.
replace go.bytecodealliance.org/pkg => $runtime
WORK

# 5. Core module, then component.
echo "== building $name ($module)"
(cd "$build/bindings" && GOWORK=$build/go.work GOOS=wasip1 GOARCH=wasm "$go" build \
  -buildmode=c-shared -tags reconcile_component -trimpath -ldflags="-checklinkname=0" \
  -o "$build/$name.core.wasm" .)
"$wit_c" component --wit "$repo/wit" "$build/$name.core.wasm" "$out"
echo "== built $out ($(stat -c %s "$out") bytes)"
