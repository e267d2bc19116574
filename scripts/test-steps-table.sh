#!/usr/bin/env bash
# Prints the steps scripts/test-step.sh recorded (TEST_STEPS_FILE, by default
# target/test-steps.tsv) as one table: each step's wall and CPU seconds, and the run's totals.
# Steps that ran side by side overlap in wall time, so the wall total is the run's own clock
# (from the first step's start, STEPS_STARTED, when given), not the sum of the steps.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
file="${TEST_STEPS_FILE:-$root/target/test-steps.tsv}"
[ -s "$file" ] || { echo "no steps recorded in $file"; exit 0; }
now="$(date +%s)"
awk -F'\t' -v started="${STEPS_STARTED:-}" -v now="$now" '
  BEGIN { printf "\n%-22s %9s %9s  %s\n", "step", "wall s", "CPU s", "result"; line = sprintf("%50s", ""); gsub(/ /, "-", line); print line }
  {
    printf "%-22s %9.1f %9.1f  %s\n", $1, $2, $3, ($4 == 0 ? "ok" : "FAILED (exit " $4 ")")
    wall += $2; cpu += $3
  }
  END {
    print line
    printf "%-22s %9.1f %9.1f\n", "sum of steps", wall, cpu
    if (started != "") printf "%-22s %9.1f %9s  (%.1f min)\n", "run, wall", now - started, "", (now - started) / 60
  }' "$file"
