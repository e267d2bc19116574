#!/usr/bin/env bash
# Side by side: client-go's workqueue and controller-runtime's controller (Go, this directory)
# against reconcile-host's queue and controller (host/benches/workqueue.rs, PEERS_ROUND=1).
# Builds both once, runs them alternately for ROUNDS rounds (default 5), prints one table.
# Usage: benches/peers/run.sh [ROUNDS]     (from the repository root: `make bench-peers`)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
rounds="${1:-${ROUNDS:-5}}"
out="$root/target/peers"
mkdir -p "$out"

echo "building client-go side (go build)..." >&2
(cd "$root/benches/peers" && go build -o "$out/peers-go" .)
echo "building reconcile-host side (cargo bench --no-run, release)..." >&2
rust_bin="$(cd "$root" && cargo bench -p reconcile-host --bench workqueue --no-run --locked \
  --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "workqueue" and m.get("executable"):
        print(m["executable"])')"
[[ -x "$rust_bin" ]] || { echo "bench-peers: the workqueue bench binary was not built; run \`cargo bench -p reconcile-host --bench workqueue --no-run\` to see why" >&2; exit 1; }

results="$out/results.txt"
: >"$results"
echo "load before: $(uptime)" >&2
for ((r = 1; r <= rounds; r++)); do
  echo "round $r/$rounds: client-go" >&2
  "$out/peers-go" | sed "s/^PEERS /go /" >>"$results"
  echo "round $r/$rounds: reconcile-host" >&2
  PEERS_ROUND=1 "$rust_bin" | grep '^PEERS ' | sed "s/^PEERS /rust /" >>"$results"
done
echo "load after: $(uptime)" >&2
python3 "$root/benches/peers/table.py" "$results" "$rounds"
