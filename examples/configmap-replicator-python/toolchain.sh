#!/usr/bin/env bash
# Installs the pinned Python component toolchain into <repo>/.toolchains/python/ (a virtualenv
# holding componentize-py, which carries its own CPython for the component) unless it is there
# already, and prints the path of its `componentize-py`. Used by this example's build.sh and by
# host/tests/guests/noop-python/build.sh. Idempotent; works from any directory.
set -euo pipefail

COMPONENTIZE_PY_VERSION=0.25.1

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=$repo/.toolchains/python
tool=$venv/bin/componentize-py

if [ -x "$tool" ] && [ "$("$tool" --version 2>/dev/null)" = "componentize-py $COMPONENTIZE_PY_VERSION" ]; then
  echo "$tool"
  exit 0
fi

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Debian's python3 needs python3-venv for `python3 -m venv` (ensurepip).
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  echo "== installing python3-venv with apt-get" >&2
  as_root apt-get update -qq >&2
  as_root apt-get install -y -qq python3-venv >&2
fi
if [ ! -x "$venv/bin/pip" ]; then
  echo "== creating the virtualenv $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
fi
echo "== installing componentize-py==$COMPONENTIZE_PY_VERSION into $venv" >&2
"$venv/bin/pip" install --quiet --disable-pip-version-check "componentize-py==$COMPONENTIZE_PY_VERSION" >&2
echo "$tool"
