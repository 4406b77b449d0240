#!/usr/bin/env bash
# The sample server's CPU time per request, route by route: what the
# server itself spends, which the load of a shared machine disturbs far
# less than req/s. Starts a release build of the sample, seeds 100 tenants
# x 20 players, then for each route: wrk 3 s (warm-up), then wrk 10 s
# while reading the server's utime+stime from /proc. With PERF=<script>,
# also records `perf record --call-graph dwarf` of the server for 4 s
# during that route's run (into Benchmarks/.build-perf/perf.data).
#
# Usage: SAMPLE_BIN=<release folder of the sample> bash Benchmarks/server-cpu.sh
#        (PATHS="/health/live:health.lua /tenants/t0/leaderboard:reads.lua" by default)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is missing: run scripts/bootstrap" >&2; exit 1; }
source Benchmarks/lib/servers.sh
sample_release
tenants=100
players=20
begin_run
start sample "$sample_bin/MultiTenantServer" --port 0 --data "$work/data"
pid=${pids[0]}
seed "$sample" "$work/tenants"
export WRK_SCRIPTS="$PWD/Benchmarks/wrk"
ticks=$(getconf CLK_TCK)
for entry in ${PATHS:-/health/live:health.lua /tenants/t0/leaderboard:reads.lua}; do
    path=${entry%%:*}; script=${entry##*:}
    WRK_TENANTS="$work/tenants" wrk -t2 -c32 -d3s -s "$WRK_SCRIPTS/$script" "$sample$path" >/dev/null
    read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
    perfpid=
    if [ -n "${PERF:-}" ] && [ "$script" = "$PERF" ]; then
        mkdir -p Benchmarks/.build-perf
        perf record -F 499 --call-graph dwarf,16384 -p "$pid" -o Benchmarks/.build-perf/perf.data -- sleep 4 >/dev/null 2>&1 &
        perfpid=$!
    fi
    output=$(WRK_TENANTS="$work/tenants" wrk -t2 -c32 -d10s --latency -s "$WRK_SCRIPTS/$script" "$sample$path")
    [ -n "$perfpid" ] && wait "$perfpid"
    read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
    requests=$(echo "$output" | awk '/requests in/ {print $1}')
    rps=$(echo "$output" | awk '/Requests\/sec/ {print $2}')
    p50=$(echo "$output" | awk '$1 == "50%" {print $2}')
    p99=$(echo "$output" | awk '$1 == "99%" {print $2}')
    awk -v p="$path" -v r="$rps" -v a="$p50" -v b="$p99" -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v n="$requests" -v t="$ticks" \
        'BEGIN { printf "%s: %s req/s, p50 %s, p99 %s; server CPU per request %.1f µs (user %.1f, system %.1f)\n", p, r, a, b, (u + s) * 1e6 / t / n, u * 1e6 / t / n, s * 1e6 / t / n }'
done
