#!/usr/bin/env bash
# Builds noop.js into ${CARGO_TARGET_DIR:-<repo>/target}/guests/noop-js.wasm with the toolchain of
# examples/website-js (pinned there, installed under <repo>/.toolchains/js/ when missing).
#   ENGINE=quickjs (default) | spidermonkey    WASI=none (default) | full
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../../../examples/website-js/toolchain.sh"
target="${CARGO_TARGET_DIR:-$JS_REPO/target}"
js_component "$here/noop.js" "$target/guests/noop-js.wasm"
