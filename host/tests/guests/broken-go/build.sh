#!/usr/bin/env bash
# Builds the broken-go test guest: ${CARGO_TARGET_DIR:-<repo>/target}/guests/broken-go.wasm, with
# the Go toolchain and build steps of guest-sdk/go/build-component.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec "$here/../../../../guest-sdk/go/build-component.sh" broken-go "$here"
