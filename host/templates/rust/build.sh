#!/usr/bin/env bash
# Builds the component for wasm32-wasip2 and copies it to build/{{name}}.wasm, the manifest's
# `module` (wherever CARGO_TARGET_DIR puts cargo's output). Adds the target with rustup when
# missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
cargo build --quiet --release --target wasm32-wasip2
mkdir -p build
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{crate}}.wasm" build/{{name}}.wasm
