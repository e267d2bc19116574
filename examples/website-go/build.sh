#!/usr/bin/env bash
# Builds website.go into the component ${CARGO_TARGET_DIR:-<repo>/target}/guests/website-go.wasm,
# installing the pinned Go toolchain and wit-bindgen (under <repo>/.toolchains/go/) first if
# they are missing (see guest-sdk/go/build-component.sh and docs/guests/go.md).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec "$here/../../guest-sdk/go/build-component.sh" website-go "$here"
