#!/usr/bin/env bash
# Builds the noop-go test guest: ${CARGO_TARGET_DIR:-<repo>/target}/guests/noop-go.wasm, with the
# Go toolchain and build steps of guest-sdk/go/build-component.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec "$here/../../../../guest-sdk/go/build-component.sh" noop-go "$here"
