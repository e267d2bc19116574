#!/usr/bin/env bash
# Builds website.js into the component ${CARGO_TARGET_DIR:-<repo>/target}/guests/website-js.wasm,
# installing the pinned toolchain (npm, under <repo>/.toolchains/js/) first if it is missing.
# Works from any directory; a second run with nothing changed does nothing.
#   ENGINE=quickjs (default) | spidermonkey    WASI=none (default) | full
# (see toolchain.sh and docs/guests/javascript.md)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/toolchain.sh"
target="${CARGO_TARGET_DIR:-$JS_REPO/target}"
js_component "$here/website.js" "$target/guests/website-js.wasm"
