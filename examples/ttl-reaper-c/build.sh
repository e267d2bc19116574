#!/usr/bin/env bash
# Builds the ttl-reaper-c component: ${CARGO_TARGET_DIR:-<repo>/target}/guests/ttl-reaper-c.wasm.
# Installs the pinned C toolchain first if it is missing (see c-guest.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec "$here/c-guest.sh" ttl-reaper-c "$here"/src/*.c "$here/../../guest-sdk/c/json.c" \
  "$here/../../guest-sdk/c/text.c"
