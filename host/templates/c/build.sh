#!/usr/bin/env bash
# Builds build/{{name}}.wasm with clang and what `reconcile-host` provides:
# 1. `reconcile-host bindings --lang c` writes the bindings of wit/'s `reconciler` world
#    (reconciler.h, reconciler.c, reconciler_component_type.o) into build/bindings;
# 2. clang compiles and links a core module for wasm32-wasi (WASI preview1) as a reactor: no
#    `main`, only the `reconcile` export;
# 3. `reconcile-host componentize` turns it into a component (WASI preview1 adapted to preview2).
# CC names the compiler (default: clang, else clang-19); WASI_SYSROOT a wasi-libc sysroot when
# the compiler has none of its own (wasi-sdk's share/wasi-sysroot).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
cc=${CC:-$(command -v clang || command -v clang-19 || true)}
if [ -z "$cc" ]; then
  echo "error: no clang on PATH; install clang, lld and wasi-libc (Debian 12: apt-get install" \
    "clang-19 lld-19 libclang-rt-19-dev-wasm32 libclang-rt-19-dev wasi-libc) or set CC" >&2
  exit 1
fi
wasm=("$cc" --target=wasm32-wasi -std=c11 -O2)
if [ -n "${WASI_SYSROOT:-}" ]; then wasm+=(--sysroot="$WASI_SYSROOT"); fi
mkdir -p build/obj
reconcile-host bindings --lang c build/bindings
echo "== clang: src/*.c -> build/{{name}}.wasm" >&2
"${wasm[@]}" -I build/bindings -c build/bindings/reconciler.c -o build/obj/bindings.o
objects=(build/obj/bindings.o)
for source in src/*.c sdk/json.c sdk/text.c; do
  object=build/obj/$(basename "${source%.c}").o
  "${wasm[@]}" -Wall -Wextra -Wshadow -Werror -I build/bindings -I sdk -c "$source" -o "$object"
  objects+=("$object")
done
# --strip-debug drops the DWARF that libc.a may carry but keeps the name section, so traps
# still show function names.
"${wasm[@]}" -mexec-model=reactor -Wl,--strip-debug "${objects[@]}" \
  build/bindings/reconciler_component_type.o -o build/{{name}}.core.wasm
reconcile-host componentize build/{{name}}.core.wasm -o build/{{name}}.wasm
