#!/usr/bin/env bash
# Builds the Python noop guest to ${CARGO_TARGET_DIR:-<repo>/target}/guests/noop-python.wasm with
# the pinned componentize-py (installed by examples/configmap-replicator-python/toolchain.sh if
# missing), skipping the build when nothing changed. Works from any directory.
#
#   --with-wasi   build without --stub-wasi instead, to <target>/guests/noop-python-wasi.wasm:
#                 the component then imports WASI, wasi:sockets included, which the host does
#                 not link (the tests use it as a realistic broken build).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
name=noop-python
flags=(--stub-wasi)
if [ "${1:-}" = --with-wasi ]; then
  name=noop-python-wasi
  flags=()
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--with-wasi]" >&2
  exit 2
fi
out=$target/guests/$name.wasm

tool=$("$repo/examples/configmap-replicator-python/toolchain.sh")
mkdir -p "$target/guests"

inputs=$(
  cd "$repo"
  "$tool" --version
  echo "${flags[@]+"${flags[@]}"}"
  find wit -type f -name '*.wit' -print0 | sort -z | xargs -0 sha256sum
  sha256sum host/tests/guests/noop-python/noop.py
)
stamp=$(sha256sum <<<"$inputs" | cut -d' ' -f1)
if [ -f "$out" ] && [ -f "$out.stamp" ] && [ "$(cat "$out.stamp")" = "$stamp" ]; then
  echo "== $name is up to date: $out"
  exit 0
fi
echo "== componentize-py ${flags[*]+"${flags[*]}"}: $here/noop.py -> $out"
start=$(date +%s)
rm -f "$out.stamp"
"$tool" -q -d "$repo/wit" -w reconciler componentize "${flags[@]+"${flags[@]}"}" -p "$here" noop -o "$out.tmp"
mv "$out.tmp" "$out"
rm -rf "$here/__pycache__" # bytecode pre-initialisation leaves next to noop.py
echo "$stamp" >"$out.stamp"
echo "== built $out ($(du -h "$out" | cut -f1), $(($(date +%s) - start)) s)"
