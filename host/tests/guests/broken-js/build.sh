#!/usr/bin/env bash
# Builds the broken-js test guests with the toolchain of examples/website-js (pinned there,
# installed under <repo>/.toolchains/js/ when missing):
#   ${CARGO_TARGET_DIR:-<repo>/target}/guests/broken-js.wasm         broken.js (data.fault)
#   ${CARGO_TARGET_DIR:-<repo>/target}/guests/broken-js-export.wasm  export/misspelled.js
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../../../examples/website-js/toolchain.sh"
target="${CARGO_TARGET_DIR:-$JS_REPO/target}"
# The SDK module is outside the directory js_component stamps: rebuild when it is newer.
sdk="$JS_REPO/guest-sdk/javascript/reconciler.js"
if [ "$sdk" -nt "$target/guests/broken-js.wasm" ]; then
  rm -f "$target/guests/broken-js.wasm.stamp"
fi
js_component "$here/broken.js" "$target/guests/broken-js.wasm"
js_component "$here/export/misspelled.js" "$target/guests/broken-js-export.wasm"
