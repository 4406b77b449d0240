#!/usr/bin/env bash
# Durable acknowledgements against asynchronous ones and against a single
# server (issue 24's figure), one run: player writes (wrk, writes.lua,
# tenants round-robin, $connections connections) straight to one node, in
# `rounds` alternating rounds of three configurations on the same machine:
#   single   the sample without --fleet (no PostgreSQL, no replication),
#   async    a one-node fleet, Litestream to a local replica store, answered
#            at commit (loss window: Litestream's sync interval),
#   durable  the same, answered once Litestream's `sync wait` has the commit
#            in the replica (grouped per tenant).
# A one-node fleet isolates the acknowledgement's cost (no forwarding: see
# fleet-forwarding.sh for that). Goal: durable p50 ≤ async p50 + 2 ms,
# durable throughput ≥ 0.7 × async. Prints a Markdown table for
# Benchmarks/RESULTS.md. Release build (SAMPLE_BIN: one made beforehand).
#
# Usage: Benchmarks/fleet-acks.sh [tenants=30] [seconds=10] [connections=32] [rounds=2]
# FLEET_BENCH_MAX_OPEN=N sets tenants.maxOpen of every node (the sample writes 256): give more than the tenants, or every request of a round robin reopens its tenant.
set -euo pipefail
cd "$(dirname "$0")/.."
tenants=${1:-30}
seconds=${2:-10}
connections=${3:-32}
rounds=${4:-2}
players=0
command -v wrk >/dev/null || { echo "wrk is missing: run scripts/bootstrap" >&2; exit 1; }
source Benchmarks/lib/servers.sh
sample_release
source Benchmarks/lib/fleet.sh
fleet_bench_begin 1

declare -A rps p50 p99 errors
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq 1 "$rounds"); do
    for config in single async durable; do
        label="$config-$round"
        fleet_bench_node 1 "$label" "$config"
        file="$FLEET_WORK/$label/tenants"
        : >"$file"
        for t in $(seq 0 $((tenants - 1))); do
            create_tenant "${node_url[1]}" "t$t" "$players" "$file"
        done
        echo "round $round: $config…" >&2
        read -r r a b e < <(fleet_bench_wrk "${node_url[1]}" /tenants/t0/players writes.lua "$file")
        rps[$label]=$r p50[$label]=$a p99[$label]=$b errors[$label]=$e
        fleet_bench_stop_nodes
    done
done

summary() {  # config -> "rps p50 p99" medians over the rounds
    local config=$1 r=() a=() b=() round
    for round in $(seq 1 "$rounds"); do r+=("${rps[$config-$round]}"); a+=("${p50[$config-$round]}"); b+=("${p99[$config-$round]}"); done
    echo "$(median "${r[@]}") $(median "${a[@]}") $(median "${b[@]}")"
}
read -r single_rps single_p50 single_p99 < <(summary single)
read -r async_rps async_p50 async_p99 < <(summary async)
read -r durable_rps durable_p50 durable_p99 < <(summary durable)
all_errors=$(for label in "${!errors[@]}"; do echo "$label=${errors[$label]}"; done | sort | tr '\n' ' ')

cat <<TABLE
$(date -u +%Y-%m-%d) $(date -u +%H:%M) UTC, $(nproc) cores, load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after; network $FLEET_NETWORK; wrk -t2 -c$connections -d${seconds}s writes.lua over $tenants tenants; medians of $rounds alternating rounds; one-node fleet, replica store on the local disk.

| configuration | writes/s | p50 ms | p99 ms | vs async (throughput) | p50 overhead vs async |
|---|---|---|---|---|---|
| single server (no fleet, no replication) | $single_rps | $single_p50 | $single_p99 | $(awk -v a="$single_rps" -v b="$async_rps" 'BEGIN {printf "%.2f×", a / b}') | $(awk -v a="$single_p50" -v b="$async_p50" 'BEGIN {printf "%+.2f ms", a - b}') |
| fleet, asynchronous | $async_rps | $async_p50 | $async_p99 | 1.00× | 0 |
| fleet, durable | $durable_rps | $durable_p50 | $durable_p99 | **$(awk -v a="$durable_rps" -v b="$async_rps" 'BEGIN {printf "%.2f×", a / b}')** (goal ≥ 0.7×) | **$(awk -v a="$durable_p50" -v b="$async_p50" 'BEGIN {printf "%+.2f ms", a - b}')** (goal ≤ 2 ms) |

non-2xx or errors per run: $all_errors
TABLE
