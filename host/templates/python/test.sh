#!/usr/bin/env bash
# Builds the component, runs the unit tests against the fake host, then `reconcile-host check`:
# the manifest, the component against the `reconciler` world, and one reconcile of the sample.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
./build.sh
PYTHONPATH=src:build/bindings python3 -B -m unittest discover -s tests
reconcile-host check plugin.yaml
