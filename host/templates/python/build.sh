#!/usr/bin/env bash
# Builds build/{{name}}.wasm from src/ with componentize-py, and the Python bindings of wit/ into
# build/bindings (what the unit tests import). Installs componentize-py 0.25.1 into .venv the
# first time, unless COMPONENTIZE_PY names a componentize-py to use.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
version=0.25.1
tool=${COMPONENTIZE_PY:-.venv/bin/componentize-py}
if [ -z "${COMPONENTIZE_PY:-}" ] && [ "$("$tool" --version 2>/dev/null)" != "componentize-py $version" ]; then
  echo "== installing componentize-py $version into .venv" >&2
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check "componentize-py==$version"
fi
mkdir -p build
rm -rf build/bindings
"$tool" -q -d wit -w reconciler bindings build/bindings
echo "== componentize-py: src/reconciler.py -> build/{{name}}.wasm" >&2
"$tool" -q -d wit -w reconciler componentize -p src reconciler -o build/{{name}}.wasm
# Pre-initialisation imports the sources and leaves bytecode beside them.
find src -name __pycache__ -type d -prune -exec rm -rf {} +
