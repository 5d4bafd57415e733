#!/usr/bin/env bash
# Runs every benchmark and prints one table of the figures README claims, each against the direct
# path measured in the same run. Usage: bash benches/all.sh
# The detailed per-bench tables are printed as they run; the summary table comes last.
#
# On a KVM guest the pipe-hop floor depends on the vCPU idle setting guest_halt_poll_ns (see
# README "Performance"). The table header prints the value in force. To measure with the kernel's
# default halt polling instead of the machine's setting, as root:
#   AIRLOCK_BENCH_HALT_POLL_NS=200000 bash benches/all.sh
# The previous value is put back when the run ends.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
halt_poll=/sys/module/haltpoll/parameters/guest_halt_poll_ns
restore=""
cleanup() {
  rm -f "$log"
  if [ -n "$restore" ]; then echo "$restore" >"$halt_poll"; fi
}
trap cleanup EXIT
if [ -n "${AIRLOCK_BENCH_HALT_POLL_NS:-}" ]; then
  restore=$(cat "$halt_poll")
  echo "$AIRLOCK_BENCH_HALT_POLL_NS" >"$halt_poll"
fi
cargo bench --bench decide --bench audit --bench spawn --bench run --bench serve --bench egress --bench first_run 2>&1 | tee "$log"
echo
grep -h '^MACHINE|' "$log" | sort -u | sed 's/^MACHINE|/machine: /'
echo "| metric | airlock | direct | comparison | target | met |"
echo "|---|---|---|---|---|---|"
grep '^SUMMARY|' "$log" | awk -F'|' '{ printf "| %s | %s | %s | %s | %s | %s |\n", $2, $3, $4, $5, $6, $7 }'
