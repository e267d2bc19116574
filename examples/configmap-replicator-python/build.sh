#!/usr/bin/env bash
# Builds the Python configmap-replicator to a WebAssembly component:
#   ${CARGO_TARGET_DIR:-<repo>/target}/guests/configmap-replicator-python.wasm
# Installs the pinned toolchain first if missing (toolchain.sh). Also writes the Python bindings
# of wit/ to <target>/guests/configmap-replicator-python/bindings, for the unit tests, type
# checkers and editors. Skips both when nothing they are made from changed. Works from any
# directory.
#
#   WASI=full (default)  a plain componentize-py build: the component imports WASI 0.2 (cli,
#                        clocks, random, io, filesystem, sockets); the host links all but sockets,
#                        whose calls trap. The clock, `os.environ`, `os.urandom`, `logging` and
#                        `print()` work.
#   WASI=none            `componentize --stub-wasi`: the component imports nothing but
#                        kube:reconcile, and every WASI call traps (no clock, no environment, no
#                        entropy, no stdout); the same size. Only for hosts that link no WASI.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
name=configmap-replicator-python
out=$target/guests/$name.wasm
bindings=$target/guests/$name/bindings

case ${WASI:=full} in
  full) flags=() ;;
  none) flags=(--stub-wasi) ;;
  *)
    echo "$0: WASI=$WASI: expected \`full\` (the default) or \`none\` (--stub-wasi)" >&2
    exit 2
    ;;
esac

tool=$("$here/toolchain.sh")
mkdir -p "$target/guests"

# Everything the outputs are made from: the tool's version, the WIT and the sources.
inputs=$(
  cd "$repo"
  "$tool" --version
  echo "WASI=$WASI"
  find wit examples/$name/src guest-sdk/python/reconcile_guest -type f \( -name '*.wit' -o -name '*.py' \) -print0 | sort -z \
    | xargs -0 sha256sum
)
stamp=$(sha256sum <<<"$inputs" | cut -d' ' -f1)

if [ -f "$bindings/.stamp" ] && [ "$(cat "$bindings/.stamp")" = "$stamp" ]; then
  echo "== bindings up to date: $bindings"
else
  echo "== generating bindings into $bindings"
  rm -rf "$bindings"
  "$tool" -q -d "$repo/wit" -w reconciler bindings "$bindings"
  echo "$stamp" >"$bindings/.stamp"
fi

if [ -f "$out" ] && [ -f "$out.stamp" ] && [ "$(cat "$out.stamp")" = "$stamp" ]; then
  echo "== $name is up to date: $out"
  exit 0
fi
echo "== componentize-py (WASI=$WASI): $here/src/replicator.py -> $out"
start=$(date +%s)
rm -f "$out.stamp"
"$tool" -q -d "$repo/wit" -w reconciler componentize "${flags[@]+"${flags[@]}"}" \
  -p "$here/src" -p "$repo/guest-sdk/python" replicator -o "$out.tmp"
mv "$out.tmp" "$out"
# Pre-initialisation imports the sources and leaves CPython 3.14 bytecode next to them.
find "$here/src" "$repo/guest-sdk/python" -name __pycache__ -type d -prune -exec rm -rf {} +
echo "$stamp" >"$out.stamp"
echo "== built $out ($(du -h "$out" | cut -f1), $(($(date +%s) - start)) s)"
