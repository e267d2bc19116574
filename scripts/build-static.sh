#!/usr/bin/env bash
# Builds a statically linked `reconcile-host` for x86_64-unknown-linux-musl and copies it to
# target/static/reconcile-host, the file the Dockerfile puts in the image. The Dockerfile's build
# stage runs this same script. Installs what the build needs when it is missing (the rustup target,
# Debian's musl-tools for the C code of ring and zstd); safe to run repeatedly.
#
# PROFILE selects the Cargo profile (default: release). The release build is stripped of symbols
# here (CARGO_PROFILE_RELEASE_STRIP), which only affects this target's build.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=x86_64-unknown-linux-musl
PROFILE=${PROFILE:-release}
CARGO=${CARGO:-cargo}
OUT=target/static/reconcile-host
# Where Cargo builds (CARGO_TARGET_DIR, as Cargo reads it; target/ by default); the binary is
# copied to OUT either way.
BUILD_DIR=${CARGO_TARGET_DIR:-target}

rustup target add "$TARGET" >/dev/null 2>&1 || rustup target add "$TARGET"

# ring, zstd-sys and psm compile C and assembly; for the musl target the cc crate uses musl-gcc.
if ! command -v musl-gcc >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends musl-tools=1.2.3-1
fi

export CARGO_PROFILE_RELEASE_STRIP="${CARGO_PROFILE_RELEASE_STRIP:-symbols}"
# Without the default features: the image runs against a real API server, so the embedded one
# (`reconcile-host dev`, feature `dev-server`) stays out of the binary, and so do the C and Go
# projects' build commands (`bindings`, `componentize`: feature `guest-toolchain`); traces
# (feature `traces`) stay in.
"$CARGO" build --locked --profile "$PROFILE" --target "$TARGET" -p reconcile-host --bin reconcile-host \
  --no-default-features --features traces

# Cargo's `dev` profile builds into `debug/`, the others into a directory of their name.
dir=$PROFILE
[ "$PROFILE" = dev ] && dir=debug
mkdir -p "$(dirname "$OUT")"
cp "$BUILD_DIR/$TARGET/$dir/reconcile-host" "$OUT"

# A static binary asks for no program interpreter (the image has no libc to load one).
# The whole output is read: under pipefail, `grep -q` stopping early could kill readelf with
# SIGPIPE and make the test false.
headers="$(readelf --program-headers "$OUT")"
if [[ "$headers" == *'program interpreter'* ]]; then
  echo "error: $OUT is dynamically linked; the image has no C library to load it" >&2
  readelf --program-headers "$OUT" | grep 'program interpreter' >&2
  exit 1
fi
"$OUT" --version
echo "built $OUT ($(du -h "$OUT" | cut -f1), $PROFILE, $TARGET)"
