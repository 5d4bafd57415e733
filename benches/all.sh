#!/usr/bin/env bash
# Runs every benchmark and prints one table of the figures README claims, each against the direct
# path measured in the same run. Usage: bash benches/all.sh
# The detailed per-bench tables are printed as they run; the summary table comes last.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo bench --bench decide --bench spawn --bench run --bench serve 2>&1 | tee "$log"
echo
echo "| metric | airlock | direct | comparison | target | met |"
echo "|---|---|---|---|---|---|"
grep '^SUMMARY|' "$log" | awk -F'|' '{ printf "| %s | %s | %s | %s | %s | %s |\n", $2, $3, $4, $5, $6, $7 }'
