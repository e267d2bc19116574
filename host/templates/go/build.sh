#!/usr/bin/env bash
# Builds build/{{name}}.wasm with Go and what `reconcile-host` provides:
# 1. `reconcile-host bindings --lang go` writes the bindings of wit/'s `reconciler` world (a
#    `main` package, module wit_component) and the runtime package they import;
# 2. sdk/component/glue.go joins them to the SDK and this package, and a go.work ties the
#    modules together (all under build/go, nothing in the sources);
# 3. GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared makes a core module (a reactor);
# 4. `reconcile-host componentize` embeds the world's type and adapts WASI preview1 to preview2.
# Go's build cache makes a rebuild with no change fast.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
build=$PWD/build/go
rm -rf "$build"
reconcile-host bindings --lang go "$build/bindings"
mkdir -p "$build/bindings/export_wit_world" "$build/argv0"
sed "s|RECONCILER_PACKAGE|$(go list .)|" sdk/component/glue.go \
  > "$build/bindings/export_wit_world/glue.go"
printf 'module argv0\n\ngo 1.26\n' > "$build/argv0/go.mod"
cp sdk/component/argv0.go "$build/argv0/argv0.go"
cat > "$build/go.work" <<WORK
go 1.26

use (
	./bindings
	./argv0
	../../sdk
	../..
)

replace go.bytecodealliance.org/pkg => ./bindings/runtime
WORK
echo "== go build: $(go list .) -> build/{{name}}.wasm" >&2
(cd "$build/bindings" && GOWORK=$build/go.work GOOS=wasip1 GOARCH=wasm go build \
  -buildmode=c-shared -tags reconcile_component -trimpath -ldflags=-checklinkname=0 \
  -o "$build/{{name}}.core.wasm" .)
reconcile-host componentize "$build/{{name}}.core.wasm" -o build/{{name}}.wasm
