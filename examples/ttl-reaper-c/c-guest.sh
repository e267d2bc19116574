#!/usr/bin/env bash
# Builds a reconciler written in C into a WebAssembly component:
#
#   c-guest.sh <name> <source.c>...    ->  ${CARGO_TARGET_DIR:-<repo>/target}/guests/<name>.wasm
#
# 1. Installs the pinned toolchain if it is missing: Debian 12's clang 19, lld 19, the compiler
#    runtimes and wasi-libc (apt-get, without recommended packages; sudo only when not root).
# 2. Builds `wit-c` (tools/wit-c, a workspace crate using the same wit-bindgen and wit-component
#    versions as the rest of the workspace) and generates the C bindings of the `reconciler`
#    world from wit/.
# 3. Compiles and links a core module for wasm32-wasi (WASI preview1) as a reactor: no `main`,
#    only the `reconcile` export.
# 4. Turns it into a component with `wit-c component` (wasmtime 48.0.8's preview1 reactor
#    adapter translates any WASI preview1 imports to preview2; a guest without any needs none).
#
# Idempotent and incremental: installs only what is missing, and rebuilds only what changed.
# Used by examples/ttl-reaper-c/build.sh and host/tests/guests/noop-c/build.sh.
set -euo pipefail

if [ "$#" -lt 2 ]; then
  echo "usage: $0 <name> <source.c>..." >&2
  exit 2
fi
name=$1
shift
sources=()
for source in "$@"; do
  sources+=("$(cd "$(dirname "$source")" && pwd)/$(basename "$source")")
done

self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
repo=$(cd "$(dirname "$self")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
case $target in /*) ;; *) target=$PWD/$target ;; esac  # relative to the cwd, as for cargo
build=$target/guests/c/$name
out=$target/guests/$name.wasm

# The toolchain: Debian 12 (bookworm) packages, main archive (clang 19 arrived in 12.11).
LLVM_VERSION=1:19.1.7-3~deb12u1
WASI_LIBC_VERSION=0.0~git20220510.9886d3d-2
packages=(
  "clang-19=$LLVM_VERSION"
  "lld-19=$LLVM_VERSION"
  "libclang-rt-19-dev-wasm32=$LLVM_VERSION"  # compiler builtins for wasm32
  "libclang-rt-19-dev=$LLVM_VERSION"         # sanitizer runtimes for the native tests
  "wasi-libc=$WASI_LIBC_VERSION"
)

installed_version() {
  dpkg-query -W -f='${db:Status-Abbrev}${Version}' "$1" 2>/dev/null | sed -n 's/^ii *//p'
}

missing=()
for package in "${packages[@]}"; do
  if [ "$(installed_version "${package%%=*}")" != "${package#*=}" ]; then
    missing+=("$package")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "== installing ${missing[*]}"
  sudo=()
  if [ "$(id -u)" != 0 ]; then sudo=(sudo); fi
  for package in "${missing[@]}"; do
    if ! apt-cache madison "${package%%=*}" | awk -F' [|] ' '{print $2}' |
        grep -qxF "${package#*=}"; then
      "${sudo[@]}" apt-get update -qq  # the package lists do not know this version yet
      break
    fi
  done
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

wit_c=$("$repo/tools/wit-c/built.sh" "$target")

mkdir -p "$build/obj" "$build/link"
"$wit_c" bindings "$repo/wit" "$build/bindings"

cc=(clang-19 --target=wasm32-wasi -std=c11 -O2)
warnings=(-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Werror)

echo "== compiling $name"
objects=()
compile() {  # compile <source> <object> <flags...>
  local source=$1 object=$2
  shift 2
  # Rebuild when the source, a header next to it, in the bindings or in the C SDK
  # (guest-sdk/c), or this script (the flags) is newer than the object.
  if [ -f "$object" ] && [ -z "$(find "$source" "$self" "$(dirname "$source")" "$build/bindings" \
      "$repo/guest-sdk/c" \
      -maxdepth 1 \( -path "$source" -o -path "$self" -o -name '*.h' \) -newer "$object" \
      -print -quit)" ]; then
    return
  fi
  "${cc[@]}" "$@" -I "$build/bindings" -I "$repo/guest-sdk/c" -c "$source" -o "$object.tmp"
  mv "$object.tmp" "$object"  # whole files only: another build may be reading
}
compile "$build/bindings/reconciler.c" "$build/obj/reconciler.o"
objects+=("$build/obj/reconciler.o")
for source in "${sources[@]}"; do
  object=$build/obj/$(basename "${source%.c}").o
  compile "$source" "$object" "${warnings[@]}"
  objects+=("$object")
done

# -mexec-model=reactor: a library-style module (`_initialize`, no `main`), which is what a
# component exporting functions is. --strip-debug drops the DWARF that Debian's libc.a carries
# (most of the size) but keeps the name section, so traps still show function names.
core=$build/$name.core.wasm
if [ ! -f "$core" ] || [ ! -f "$out" ] ||
    [ -n "$(find "${objects[@]}" "$self" "$build/bindings" -newer "$core" -print -quit)" ]; then
  "${cc[@]}" -mexec-model=reactor -Wl,--strip-debug "${objects[@]}" \
    "$build/bindings/reconciler_component_type.o" -o "$build/link/$name.core.wasm"
  mv "$build/link/$name.core.wasm" "$core"  # (the file name is recorded in the module)
  "$wit_c" component "$core" "$out"
fi
echo "== built $out ($(stat -c %s "$out") bytes)"
