#!/usr/bin/env bash
# Builds build/{{name}}.wasm from src/reconciler.js (and the modules it imports) with
# componentize-qjs (QuickJS), pinned by package.json and package-lock.json: `npm install` the
# first time, unless COMPONENTIZE_QJS names a componentize-qjs to use. The component imports no
# WASI (`--stub-wasi`): log through `kube:reconcile/log`, not console.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
tool=${COMPONENTIZE_QJS:-node_modules/.bin/componentize-qjs}
if [ -z "${COMPONENTIZE_QJS:-}" ] && [ ! -x "$tool" ]; then
  echo "== npm install (componentize-qjs)" >&2
  npm install --no-audit --no-fund --loglevel=error >&2
fi
mkdir -p build
"$tool" --wit wit/reconcile.wit --world reconciler --js src/reconciler.js --sync --stub-wasi \
  --output build/{{name}}.wasm >&2
