#!/usr/bin/env bash
# Runs the native tests of the reconciler's parsers (tests/parsers_test.c) under AddressSanitizer
# and UndefinedBehaviorSanitizer, with the pinned clang 19 (build.sh installs it).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
case $target in /*) ;; *) target=$PWD/$target ;; esac
if ! command -v clang-19 >/dev/null; then
  "$here/build.sh"  # installs the toolchain
fi
binary=$target/guests/c/ttl-reaper-c/parsers-test
mkdir -p "$(dirname "$binary")"
echo "== compiling the parser tests (native, sanitizers on)"
clang-19 -std=c11 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all \
  -fno-omit-frame-pointer -Wall -Wextra -Werror -I "$here/src" \
  "$here/src/json.c" "$here/src/timestamp.c" "$here/src/text.c" "$here/tests/parsers_test.c" \
  -o "$binary"
"$binary"
