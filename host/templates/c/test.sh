#!/usr/bin/env bash
# Builds the component (and with it the bindings), runs the unit tests against the fake host
# natively under AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer, then
# `reconcile-host check`: the manifest, the component against the `reconciler` world, and one
# reconcile of the sample.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
./build.sh
cc=${CC:-$(command -v clang || command -v clang-19)}
native=("$cc" -std=c11 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all
  -fno-omit-frame-pointer)
echo "== unit tests (sanitizers on)" >&2
# The generated bindings carry wasm-only attributes (import and export names): -w.
"${native[@]}" -w -I build/bindings -c build/bindings/reconciler.c -o build/obj/bindings.native.o
"${native[@]}" -Wall -Wextra -Werror -I build/bindings -I sdk src/*.c sdk/json.c sdk/text.c \
  sdk/fake_host.c tests/reconciler_test.c build/obj/bindings.native.o -o build/reconciler-test
ASAN_OPTIONS=detect_leaks=1 build/reconciler-test
reconcile-host check plugin.yaml
