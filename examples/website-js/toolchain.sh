# The JavaScript-to-component toolchain, shared by examples/website-js/build.sh and
# host/tests/guests/noop-js/build.sh. Source it, then call `js_component SOURCE OUT`.
#
# Settings (environment):
#   ENGINE=quickjs       (default) componentize-qjs: QuickJS, 1.6 MB components, builds in seconds
#   ENGINE=spidermonkey  componentize-js: SpiderMonkey (StarlingMonkey), ~12 MB, slower builds
#   WASI=none            (default) the component imports no WASI at all (see docs/guests/javascript.md:
#                        console.* and Date trap under QuickJS; under SpiderMonkey console.* is
#                        dropped and Date and Math.random are frozen at build time)
#   WASI=full            the engine's default WASI imports (console.* reaches the host log, Date works)
#
# Each engine's npm packages are pinned by a package.json and package-lock.json under
# examples/website-js/toolchain/<engine>/ and installed with npm into
# <repo>/.toolchains/js/<engine>/ (gitignored), again only when the lock file changes.

JS_TOOLCHAIN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/toolchain"
JS_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

js_say() { echo "[js] $*" >&2; }

# Installs node and npm from Debian when they are missing (sudo only when not root).
js_ensure_node() {
  if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    return
  fi
  js_say "node/npm not found: installing Debian's nodejs and npm"
  local sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq nodejs npm
}

# Installs the pinned toolchain of engine $1 unless that exact lock file is installed; prints the
# directory holding its node_modules.
js_toolchain() {
  local engine=$1 pins="$JS_TOOLCHAIN_DIR/$1" dir="$JS_REPO/.toolchains/js/$1"
  if [ ! -f "$pins/package-lock.json" ]; then
    js_say "unknown ENGINE=$engine: expected quickjs or spidermonkey (pins in $JS_TOOLCHAIN_DIR/)"
    return 2
  fi
  local pinned
  pinned=$(sha256sum <"$pins/package-lock.json" | cut -d' ' -f1)
  if [ "$(cat "$dir/.installed" 2>/dev/null)" = "$pinned" ]; then
    echo "$dir"
    return
  fi
  # One install at a time (parallel builds, tests): the others wait, then find it installed.
  mkdir -p "$JS_REPO/.toolchains/js"
  local lock
  exec {lock}>"$JS_REPO/.toolchains/js/.$engine.lock"
  flock "$lock"
  if [ "$(cat "$dir/.installed" 2>/dev/null)" = "$pinned" ]; then
    exec {lock}>&-
    echo "$dir"
    return
  fi
  js_ensure_node
  js_say "installing the pinned $engine toolchain into $dir (npm install from the lock file)"
  mkdir -p "$dir"
  rm -f "$dir/.installed"
  cp "$pins/package.json" "$pins/package-lock.json" "$dir/"
  # Not `npm ci`: componentize-qjs lists platform packages that were never published, which
  # `npm ci` reports as a lock file out of sync; `npm install` installs the locked versions.
  if ! (cd "$dir" && npm install --no-audit --no-fund --no-save --loglevel=error >&2); then
    js_say "npm install failed in $dir: the npm registry must be reachable; the pins are $pins/package-lock.json"
    return 1
  fi
  echo "$pinned" >"$dir/.installed"
  exec {lock}>&-
  echo "$dir"
}

# Builds the JavaScript module $1 (with the modules it imports by relative path) into the
# component $2 against wit/reconcile.wit, world `reconciler`, with $ENGINE and $WASI. Skips the
# build when the inputs (the *.js files next to $1, the WIT, the pins, this script, the settings)
# have not changed since the last one (a stamp next to the output).
js_component() {
  local source=$1 out=$2 engine=${ENGINE:-quickjs} wasi=${WASI:-none}
  local wit="$JS_REPO/wit/reconcile.wit"
  case "$wasi" in
    none | full) ;;
    *) js_say "unknown WASI=$wasi: expected none or full"; return 2 ;;
  esac
  local toolchain
  toolchain=$(js_toolchain "$engine") || return 1
  local stamp
  # Every module next to the source counts: relative imports are bundled into the component.
  stamp=$(cat "$source" "$(dirname "$source")"/*.js "$wit" \
    "$JS_TOOLCHAIN_DIR/$engine/package-lock.json" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)
  stamp="$stamp engine=$engine wasi=$wasi"
  if [ -f "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then
    js_say "$out is up to date ($engine, WASI=$wasi)"
    return
  fi
  mkdir -p "$(dirname "$out")"
  local tmp="$out.tmp.$$"
  local started=$SECONDS
  js_say "componentizing $source with $engine (WASI=$wasi) -> $out"
  case "$engine" in
    quickjs)
      # --sync: the host does not enable the component-model async ABI.
      local flags=(--sync)
      [ "$wasi" = none ] && flags+=(--stub-wasi)
      "$toolchain/node_modules/.bin/componentize-qjs" --wit "$wit" --world reconciler \
        --js "$source" "${flags[@]}" --output "$tmp" >&2 || { rm -f "$tmp"; return 1; }
      ;;
    spidermonkey)
      # http and fetch-event are always off: they would import wasi:http.
      local disable=(http fetch-event)
      [ "$wasi" = none ] && disable+=(stdio random clocks)
      "$toolchain/node_modules/.bin/componentize-js" "$source" --wit "$wit" \
        --world-name reconciler --disable "${disable[@]}" --out "$tmp" >&2 || { rm -f "$tmp"; return 1; }
      ;;
    *)
      js_say "unknown ENGINE=$engine: expected quickjs or spidermonkey"
      return 2
      ;;
  esac
  mv -f "$tmp" "$out"
  echo "$stamp" >"$out.stamp"
  js_say "built $out ($(stat -c %s "$out") bytes) in $((SECONDS - started)) s"
}
