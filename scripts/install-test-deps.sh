#!/usr/bin/env bash
# Installs what the test suite needs on a fresh machine; safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== test dependencies"
rustup component add rustfmt clippy >/dev/null 2>&1 || rustup component add rustfmt clippy
# Plugins and the test guests are WebAssembly components built for this target.
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2

# The official Kubernetes Python client, for the embedded API server's compatibility tests.
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! .venv/bin/python -c 'import kubernetes' >/dev/null 2>&1; then
  .venv/bin/pip install --quiet kubernetes
fi

# kubectl, for the same tests: on PATH, else the Google Cloud SDK's, else Debian's package.
if ! command -v kubectl >/dev/null 2>&1 && [ ! -x /usr/lib/google-cloud-sdk/bin/kubectl ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq kubernetes-client
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq kubernetes-client
  fi
fi

# The CNCF distribution registry (Debian's docker-registry), which the OCI tests start on
# loopback with a configuration of their own (not the service the package installs).
if ! command -v docker-registry >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq docker-registry
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq docker-registry
  fi
fi
