#!/usr/bin/env bash
# What a durable acknowledgement costs PostgreSQL (issue 33's figure): a
# one-node fleet, player writes (wrk, writes.lua, tenants round-robin,
# $connections connections) for $seconds, once with durable and once with
# asynchronous acknowledgements; PostgreSQL's CPU (its postmaster and
# backends, from /proc), the node's CPU and its Litestream's, WAL bytes
# (pg_stat_wal) over the run, divided by the writes answered; how busy the
# machine's cores were; and the durable tail's rounds (the node's
# /metrics: changes per round, the mean wait for a round and the mean
# round). Prints a Markdown table for Benchmarks/RESULTS.md. Release build
# (SAMPLE_BIN: one made beforehand).
#
# Usage: Benchmarks/fleet-pg-cost.sh [tenants=30] [seconds=10] [connections=32]
set -euo pipefail
cd "$(dirname "$0")/.."
tenants=${1:-30}
seconds=${2:-10}
connections=${3:-32}
players=0
command -v wrk >/dev/null || { echo "wrk is missing: run scripts/bootstrap" >&2; exit 1; }
source Benchmarks/lib/servers.sh
sample_release
source Benchmarks/lib/fleet.sh
fleet_bench_begin 1

# CPU ticks (utime + stime, with those of exited children) of the
# cluster's postmaster and of its children alive now.
pg_ticks() {
    local master pid total=0
    master=$(head -n 1 "$FLEET_PG_DIR/data/postmaster.pid")
    for pid in $master $(awk -v m="$master" '$4 == m {print $1}' /proc/[0-9]*/stat 2>/dev/null); do
        total=$((total + $(awk '{print $14 + $15 + $16 + $17}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    echo "$total"
}
# CPU ticks of the node (the sample's process and its children alive now:
# Litestream), and of the whole machine (busy, and all, from /proc/stat).
node_ticks() {  # label -> "node children"
    local node pid children=0
    node=$(pgrep -f "MultiTenantServer.*$1" | head -n 1)
    for pid in $(awk -v m="$node" '$4 == m {print $1}' /proc/[0-9]*/stat 2>/dev/null); do
        children=$((children + $(awk '{print $14 + $15 + $16 + $17}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    echo "$(awk '{print $14 + $15}' "/proc/$node/stat") $children"
}
machine_ticks() { awk '$1 == "cpu" {busy = $2 + $3 + $4 + $7 + $8; print busy, busy + $5 + $6}' /proc/stat; }
pg_wal_bytes() { fleet_psql -c "SELECT wal_bytes FROM pg_stat_wal"; }
metric() { curl -sf "$1/metrics" -H "Authorization: Bearer $MTS_OPERATOR_TOKEN" | awk -v m="$2" '$1 == m {print $2}'; }

ticks_per_second=$(getconf CLK_TCK)
rows=()
for config in durable async; do
    fleet_bench_node 1 "cost-$config" "$config"
    file="$FLEET_WORK/cost-$config/tenants"
    : >"$file"
    for t in $(seq 0 $((tenants - 1))); do create_tenant "${node_url[1]}" "t$t" "$players" "$file"; done
    echo "$config…" >&2
    ticks=$(pg_ticks) wal=$(pg_wal_bytes)
    read -r node litestream < <(node_ticks "cost-$config")
    read -r busy all < <(machine_ticks)
    read -r rps p50 p99 errors < <(fleet_bench_wrk "${node_url[1]}" /tenants/t0/players writes.lua "$file")
    ticks=$(($(pg_ticks) - ticks)) wal=$(($(pg_wal_bytes) - wal))
    read -r node_after litestream_after < <(node_ticks "cost-$config")
    node=$((node_after - node)) litestream=$((litestream_after - litestream))
    read -r busy_after all_after < <(machine_ticks)
    busy=$((busy_after - busy)) all=$((all_after - all))
    changes=$(metric "${node_url[1]}" grdbregistry_tail_appended_changes_total) rounds=$(metric "${node_url[1]}" grdbregistry_tail_rounds_total)
    wait=$(metric "${node_url[1]}" grdbregistry_tail_round_wait_sum) took=$(metric "${node_url[1]}" grdbregistry_tail_round_duration_sum)
    rows+=("$(awk -v c="$config" -v rps="$rps" -v s="$seconds" -v p50="$p50" -v t="$ticks" -v hz="$ticks_per_second" -v w="$wal" \
        -v nt="$node" -v lt="$litestream" -v busy="$busy" -v all="$all" -v n="${changes:-0}" -v r="${rounds:-0}" -v wait="${wait:-0}" -v took="${took:-0}" -v e="$errors" 'BEGIN {
        writes = rps * s
        printf "| %s | %.0f | %.1f | %.0f µs | %.0f | %.0f µs | %.0f µs | %.0f %% | %s | %s | %s | %s |\n", c, rps, p50, t / hz * 1e6 / writes, w / writes,
            nt / hz * 1e6 / writes, lt / hz * 1e6 / writes, busy * 100 / all,
            (r > 0 ? sprintf("%.1f", n / r) : "—"), (n > 0 ? sprintf("%.1f ms", wait / n * 1000) : "—"),
            (r > 0 ? sprintf("%.1f ms", took / r * 1000) : "—"), e }')")
    fleet_bench_stop_nodes
done

cat <<TABLE
$tenants tenants, wrk -t2 -c$connections -d${seconds}s writes, one node; PostgreSQL's CPU and WAL over the run ÷ writes answered:

| acknowledgements | writes/s | p50 ms | PostgreSQL CPU per write | WAL bytes per write | node CPU per write | its Litestream's | machine busy | changes per round | wait for a round | round | non-2xx |
|---|---|---|---|---|---|---|---|---|---|---|---|
$(printf '%s\n' "${rows[@]}")
TABLE
