#!/usr/bin/env bash
# Pushes build/{{name}}.wasm to the registry reference given (`<registry>/<repository>:<tag>`;
# INSECURE=1 for plain HTTP) and prints the ReconcilerPlugin object that declares it, pinned to
# the digest pushed: `./ship.sh <reference> | kubectl apply -f -`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
if [ "$#" -ne 1 ]; then
  echo "usage: $0 <registry>/<repository>:<tag>" >&2
  exit 2
fi
pinned=$(reconcile-host push build/{{name}}.wasm "$1" ${INSECURE:+--insecure})
cat <<YAML
apiVersion: reconcile-host.dev/v1alpha1
kind: ReconcilerPlugin
metadata:
  name: {{name}}
spec:
  oci: $pinned
YAML
# The manifest's fields but `name` and `module`, as the spec.
grep -v -E '^(name|module):' plugin.yaml | sed 's/^/  /'
