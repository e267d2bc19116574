#!/usr/bin/env bash
# Runs the unit tests against the fake host, builds the component, then `reconcile-host check`:
# the manifest, the component against the `reconciler` world, and one reconcile of the sample.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
go test ./...
./build.sh
reconcile-host check plugin.yaml
