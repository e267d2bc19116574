#!/usr/bin/env bash
# Builds the broken-c test guest: ${CARGO_TARGET_DIR:-<repo>/target}/guests/broken-c.wasm, with the
# C toolchain and build steps of examples/ttl-reaper-c (c-guest.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec "$here/../../../../examples/ttl-reaper-c/c-guest.sh" broken-c "$here/broken.c"
