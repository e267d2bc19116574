#!/usr/bin/env bash
# Builds the Python noop guest to ${CARGO_TARGET_DIR:-<repo>/target}/guests/noop-python.wasm with
# the pinned componentize-py (installed by examples/configmap-replicator-python/toolchain.sh if
# missing), skipping the build when nothing changed. Works from any directory.
#
#   WASI=full (default)  a plain componentize-py build, importing WASI 0.2 (sockets included,
#                        which the host satisfies with stubs that trap)
#   WASI=none            `componentize --stub-wasi`: imports nothing but kube:reconcile
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
name=noop-python
case ${WASI:=full} in
  full) flags=() ;;
  none) flags=(--stub-wasi) ;;
  *)
    echo "$0: WASI=$WASI: expected \`full\` (the default) or \`none\` (--stub-wasi)" >&2
    exit 2
    ;;
esac
out=$target/guests/$name.wasm

tool=$("$repo/examples/configmap-replicator-python/toolchain.sh")
mkdir -p "$target/guests"

inputs=$(
  cd "$repo"
  "$tool" --version
  echo "WASI=$WASI"
  find wit -type f -name '*.wit' -print0 | sort -z | xargs -0 sha256sum
  sha256sum host/tests/guests/noop-python/noop.py
)
stamp=$(sha256sum <<<"$inputs" | cut -d' ' -f1)
if [ -f "$out" ] && [ -f "$out.stamp" ] && [ "$(cat "$out.stamp")" = "$stamp" ]; then
  echo "== $name is up to date: $out"
  exit 0
fi
echo "== componentize-py (WASI=$WASI): $here/noop.py -> $out"
start=$(date +%s)
rm -f "$out.stamp"
"$tool" -q -d "$repo/wit" -w reconciler componentize "${flags[@]+"${flags[@]}"}" -p "$here" noop -o "$out.tmp"
mv "$out.tmp" "$out"
rm -rf "$here/__pycache__" # bytecode pre-initialisation leaves next to noop.py
echo "$stamp" >"$out.stamp"
echo "== built $out ($(du -h "$out" | cut -f1), $(($(date +%s) - start)) s)"
