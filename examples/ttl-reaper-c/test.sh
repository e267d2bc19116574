#!/usr/bin/env bash
# Native tests of the reconciler, under AddressSanitizer, LeakSanitizer and
# UndefinedBehaviorSanitizer, with the pinned clang 19:
#   tests/parsers_test.c  the JSON scanner, timestamps and text buffers, on malformed and
#                         truncated input;
#   tests/reaper_test.c   the whole reconciler through the generated bindings' raw export, with
#                         a mock host behind the raw imports: answers, error texts, and no leaks
#                         of anything the bindings hand the guest.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
case $target in /*) ;; *) target=$PWD/$target ;; esac

"$here/build.sh"  # the toolchain and the bindings
build=$target/guests/c/ttl-reaper-c
cc=(clang-19 -std=c11 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all
  -fno-omit-frame-pointer)
warnings=(-Wall -Wextra -Werror)
sdk=$repo/guest-sdk/c
sources=("$sdk/json.c" "$sdk/text.c" "$here/src/timestamp.c")

echo "== compiling the native tests (sanitizers on)"
"${cc[@]}" "${warnings[@]}" -I "$here/src" -I "$sdk" "${sources[@]}" "$here/tests/parsers_test.c" \
  -o "$build/parsers-test"
# The generated bindings carry wasm-only attributes (import and export names): -w.
"${cc[@]}" -w -I "$build/bindings" -c "$build/bindings/reconciler.c" \
  -o "$build/obj/reconciler.native.o"
"${cc[@]}" "${warnings[@]}" -I "$here/src" -I "$sdk" -I "$build/bindings" "${sources[@]}" \
  "$here/src/reaper.c" "$here/tests/reaper_test.c" "$build/obj/reconciler.native.o" \
  -o "$build/reaper-test"

export ASAN_OPTIONS=detect_leaks=1
"$build/parsers-test"
"$build/reaper-test"
