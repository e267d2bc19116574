#!/usr/bin/env bash
# Runs one step of `make test` and appends its name, wall seconds, CPU seconds (user + system of
# the step and everything it waited for) and exit status to the step file that
# scripts/test-steps-table.sh prints: TEST_STEPS_FILE, by default target/test-steps.tsv.
#
#   scripts/test-step.sh <name> <command> [args...]
#
# The command's exit status is the script's; a failed step is recorded before it fails the run.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 <step name> <command> [args...]" >&2; exit 2; }
name="$1"
shift
root="$(cd "$(dirname "$0")/.." && pwd)"
file="${TEST_STEPS_FILE:-$root/target/test-steps.tsv}"
mkdir -p "$(dirname "$file")"

seconds() { # "1m2.345s" (bash `times`) -> 62.345
  local t="$1" m s
  m="${t%%m*}"
  s="${t#*m}"
  s="${s%s}"
  awk -v m="$m" -v s="$s" 'BEGIN { printf "%.1f", m * 60 + s }'
}

echo "== $name: $*"
start="$(date +%s.%N)"
if [ -n "${STEP_PREFIX:-}" ]; then
  # Steps run side by side (make test): each line says which step wrote it.
  "$@" 2>&1 | sed -u "s/^/[$name] /"
  status=${PIPESTATUS[0]}
else
  "$@"
  status=$?
fi
end="$(date +%s.%N)"
# The second line of `times` is the user and system time of this shell's finished children
# (`times` in this shell, not a subshell: a subshell has no children of its own yet).
times_file="$(mktemp)"
times >"$times_file"
read -r user sys < <(sed -n 2p "$times_file")
rm -f "$times_file"
cpu="$(awk -v u="$(seconds "$user")" -v s="$(seconds "$sys")" 'BEGIN { printf "%.1f", u + s }')"
wall="$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')"
printf '%s\t%s\t%s\t%s\n' "$name" "$wall" "$cpu" "$status" >>"$file"
echo "== $name: ${wall} s wall, ${cpu} s CPU, exit $status"
exit "$status"
