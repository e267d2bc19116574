#!/usr/bin/env bash
# Prints the path of an up-to-date `wit-c` for the C and Go guests' builds, building it first when
# it is missing or older than its sources or the lock file:
#
#   tools/wit-c/built.sh <target-dir>   ->  <target-dir>/debug/wit-c
#
# Cargo decides what to rebuild, but waits for any other build in the same target directory
# first: the time check spares the guests' builds that wait while `cargo test` runs.
set -euo pipefail

if [ "$#" -ne 1 ]; then
  echo "usage: $0 <target-dir>" >&2
  exit 2
fi
target=$1
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
wit_c=$target/debug/wit-c
if [ ! -x "$wit_c" ] || [ -n "$(find "$repo/tools/wit-c" "$repo/Cargo.lock" "$repo/guest-sdk/go/component/cabi-realloc-keep.patch" -type f \
    -newer "$wit_c" -print -quit)" ]; then
  echo "== building wit-c (tools/wit-c)" >&2
  "${CARGO:-cargo}" build --quiet --locked --manifest-path "$repo/Cargo.toml" -p wit-c \
    --target-dir "$target" >&2
  touch "$wit_c"  # cargo leaves an up-to-date binary's time alone
fi
echo "$wit_c"
