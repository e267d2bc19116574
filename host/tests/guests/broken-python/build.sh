#!/usr/bin/env bash
# Builds the broken-python test guest to ${CARGO_TARGET_DIR:-<repo>/target}/guests/broken-python.wasm
# with the pinned componentize-py (installed by examples/configmap-replicator-python/toolchain.sh
# if missing) and the Python SDK, reconcile_guest, from guest-sdk/python. Skips the build
# when nothing changed. Works from any directory.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
name=broken-python
out=$target/guests/$name.wasm
sdk=$repo/guest-sdk/python

tool=$("$repo/examples/configmap-replicator-python/toolchain.sh")
mkdir -p "$target/guests"

inputs=$(
  cd "$repo"
  "$tool" --version
  find wit "$sdk/reconcile_guest" -type f \( -name '*.wit' -o -name '*.py' \) -print0 | sort -z \
    | xargs -0 sha256sum
  sha256sum "$here/broken.py"
)
stamp=$(sha256sum <<<"$inputs" | cut -d' ' -f1)
if [ -f "$out" ] && [ -f "$out.stamp" ] && [ "$(cat "$out.stamp")" = "$stamp" ]; then
  echo "== $name is up to date: $out"
  exit 0
fi
echo "== componentize-py: $here/broken.py -> $out"
start=$(date +%s)
rm -f "$out.stamp"
"$tool" -q -d "$repo/wit" -w reconciler componentize -p "$here" -p "$sdk" broken -o "$out.tmp"
mv "$out.tmp" "$out"
# Pre-initialisation imports the sources and leaves bytecode next to them.
rm -rf "$here/__pycache__" "$sdk/reconcile_guest/__pycache__"
echo "$stamp" >"$out.stamp"
echo "== built $out ($(du -h "$out" | cut -f1), $(($(date +%s) - start)) s)"
