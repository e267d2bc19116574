#!/usr/bin/env bash
# Installs what the test suite needs on a fresh machine; safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== test dependencies"
rustup component add rustfmt clippy >/dev/null 2>&1 || rustup component add rustfmt clippy
